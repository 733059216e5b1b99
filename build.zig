//! The native build of sqlite-multiwriter. `zig build` produces, for the host:
//!   lib/libmwsqlite3.{so,dylib} / mwsqlite3.dll   SQLite + the engine, VFS registered at start
//!   lib/libmultiwriter.{so,dylib} / multiwriter.dll the loadable extension, without SQLite
//!   lib/libmwsqlite3.a                             the static library (SQLite + engine)
//! `zig build test` builds and runs the C tests of native/test.
//! `zig build release` builds every release target into zig-out/release/<target>/ and
//! checks each artifact (release/check-artifacts.mjs).
const std = @import("std");

/// SQLite compile options, chosen on purpose (docs/design/engine.md explains each).
const sqlite_flags = [_][]const u8{
    "-DSQLITE_THREADSAFE=1", // serialized by default; the binding opens with NOMUTEX
    "-DSQLITE_DQS=0",
    "-DSQLITE_DEFAULT_MEMSTATUS=0",
    "-DSQLITE_DISABLE_PAGECACHE_OVERFLOW_STATS",
    "-DSQLITE_USE_URI=1",
    "-DSQLITE_DEFAULT_FOREIGN_KEYS=0",
    "-DSQLITE_LIKE_DOESNT_MATCH_BLOBS",
    "-DSQLITE_ENABLE_FTS5",
    "-DSQLITE_ENABLE_RTREE",
    "-DSQLITE_ENABLE_GEOPOLY",
    "-DSQLITE_ENABLE_MATH_FUNCTIONS",
    "-DSQLITE_ENABLE_COLUMN_METADATA",
    "-DSQLITE_ENABLE_STAT4",
    "-DSQLITE_ENABLE_DBSTAT_VTAB",
    "-DSQLITE_ENABLE_BYTECODE_VTAB",
    "-DSQLITE_ENABLE_UPDATE_DELETE_LIMIT",
    "-DSQLITE_MAX_VARIABLE_NUMBER=250000",
    "-DSQLITE_OMIT_DEPRECATED",
    "-DSQLITE_OMIT_SHARED_CACHE",
    "-DSQLITE_EXTRA_INIT=mw_sqlite_extra_init",
};

const posix_flags = [_][]const u8{
    "-DHAVE_USLEEP=1", // otherwise busy waits sleep whole seconds
    "-DHAVE_FDATASYNC=1",
    "-DHAVE_LOCALTIME_R=1",
    "-DHAVE_GMTIME_R=1",
    "-DHAVE_STRCHRNUL=0",
};

const engine_flags = [_][]const u8{
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-fno-strict-aliasing",
    "-D_GNU_SOURCE",
};

/// Every release target: name (the folder under zig-out/release) and Zig triple.
pub const release_targets = [_]struct { name: []const u8, triple: []const u8 }{
    .{ .name = "linux-x64-gnu", .triple = "x86_64-linux-gnu.2.17" },
    .{ .name = "linux-arm64-gnu", .triple = "aarch64-linux-gnu.2.17" },
    .{ .name = "linux-x64-musl", .triple = "x86_64-linux-musl" },
    .{ .name = "linux-arm64-musl", .triple = "aarch64-linux-musl" },
    .{ .name = "darwin-x64", .triple = "x86_64-macos.11.0" },
    .{ .name = "darwin-arm64", .triple = "aarch64-macos.11.0" },
    .{ .name = "win32-x64", .triple = "x86_64-windows-gnu" },
};

/// The engine's folders under native/src, one per layer from the bottom up
/// (docs/design/engine.md, "Layers"): their .c files are the engine's sources. Only native/src
/// itself is an include path: a file includes another folder's header with the folder
/// (`#include "growth/relocate.h"`).
const engine_dirs = [_][]const u8{
    "native/src",
    "native/src/platform",
    "native/src/btree",
    "native/src/durability",
    "native/src/core",
    "native/src/growth",
    "native/src/rebase",
    "native/src/processes",
    "native/src/replica",
    "native/src/compact",
    "native/src/vfs",
};

/// Adds the include paths of the engine's headers (and SQLite's) to a module.
fn addEngineIncludes(b: *std.Build, mod: *std.Build.Module) void {
    mod.addIncludePath(b.path("native/include"));
    mod.addIncludePath(b.path("native/src"));
    mod.addIncludePath(b.path("native/sqlite"));
}

/// Every .c file of the engine's folders, as paths relative to native/src, sorted.
fn engineSources(b: *std.Build) []const []const u8 {
    var list = std.ArrayList([]const u8).init(b.allocator);
    for (engine_dirs) |d| {
        var dir = b.build_root.handle.openDir(d, .{ .iterate = true }) catch @panic("an engine folder is missing");
        defer dir.close();
        var it = dir.iterate();
        while (it.next() catch @panic("cannot list an engine folder")) |entry| {
            if (entry.kind == .file and std.mem.endsWith(u8, entry.name, ".c")) {
                const rel = d["native/src".len..];
                const name = if (rel.len == 0) b.dupe(entry.name) else b.fmt("{s}/{s}", .{ rel[1..], entry.name });
                list.append(name) catch @panic("out of memory");
            }
        }
    }
    std.mem.sort([]const u8, list.items, {}, struct {
        fn lt(_: void, a: []const u8, c: []const u8) bool {
            return std.mem.lessThan(u8, a, c);
        }
    }.lt);
    return list.items;
}

fn joinFlags(b: *std.Build, parts: []const []const []const u8) []const []const u8 {
    var list = std.ArrayList([]const u8).init(b.allocator);
    for (parts) |p| list.appendSlice(p) catch @panic("out of memory");
    return list.items;
}

pub const Artifacts = struct {
    shared: *std.Build.Step.Compile,
    extension: *std.Build.Step.Compile,
    static: *std.Build.Step.Compile,
};

fn addModule(b: *std.Build, target: std.Build.ResolvedTarget, optimize: std.builtin.OptimizeMode, with_sqlite: bool, extension: bool) *std.Build.Module {
    const t = target.result;
    const windows = t.os.tag == .windows;
    const mod = b.createModule(.{ .target = target, .optimize = optimize, .link_libc = true, .pic = true });
    addEngineIncludes(b, mod);
    const visibility: []const []const u8 = if (windows)
        &.{"-DSQLITE_API=__declspec(dllexport)"}
    else
        &.{ "-fvisibility=hidden", "-DSQLITE_API=__attribute__((visibility(\"default\")))" };
    const os_flags: []const []const u8 = if (windows) &.{} else &posix_flags;
    if (with_sqlite) {
        mod.addCSourceFile(.{
            .file = b.path("native/sqlite/sqlite3.c"),
            .flags = joinFlags(b, &.{ &sqlite_flags, os_flags, visibility }),
        });
    }
    const mode: []const []const u8 = if (extension) &.{"-DMW_EXTENSION"} else &.{};
    mod.addCSourceFiles(.{
        .root = b.path("native/src"),
        .files = engineSources(b),
        .flags = joinFlags(b, &.{ &engine_flags, if (windows) &.{} else &.{"-fvisibility=hidden"}, mode }),
    });
    if (t.os.tag == .linux and t.abi.isGnu()) mod.linkSystemLibrary("pthread", .{});
    if (t.os.tag == .linux and t.abi.isGnu()) mod.linkSystemLibrary("m", .{});
    if (t.os.tag == .linux and t.abi.isGnu()) mod.linkSystemLibrary("dl", .{});
    return mod;
}

pub fn addArtifacts(b: *std.Build, target: std.Build.ResolvedTarget, optimize: std.builtin.OptimizeMode) Artifacts {
    return .{
        .shared = b.addLibrary(.{ .linkage = .dynamic, .name = "mwsqlite3", .root_module = addModule(b, target, optimize, true, false) }),
        .extension = b.addLibrary(.{ .linkage = .dynamic, .name = "multiwriter", .root_module = addModule(b, target, optimize, false, true) }),
        .static = b.addLibrary(.{ .linkage = .static, .name = "mwsqlite3", .root_module = addModule(b, target, optimize, true, false) }),
    };
}

/// A test that runs its own binary again (test_engine_recover, test_processes) needs the emulator
/// when the tests run under qemu-user (-fqemu) and the kernel has no binfmt_misc
/// entry for the target: MW_TEST_EMULATOR names it, QEMU_LD_PREFIX gives it the
/// glibc that zig's own qemu command line passes with -L (--glibc-runtimes).
fn setEmulatorEnv(b: *std.Build, run: *std.Build.Step.Run, t: std.Target) void {
    if (!b.enable_qemu) return;
    switch (std.zig.system.getExternalExecutor(b.graph.host.result, &t, .{ .link_libc = true, .qemu_fixes_dl = t.isGnuLibC() and b.glibc_runtimes_dir != null })) {
        .qemu => |bin| {
            run.setEnvironmentVariable("MW_TEST_EMULATOR", bin);
            // Emulation is 5-20 times slower: the tests that scale their loops (the fault
            // test tries every 4th call, the checkers run fewer transactions) do so.
            run.setEnvironmentVariable("MW_TEST_SCALE", "0.25");
            if (t.isGnuLibC()) if (b.glibc_runtimes_dir) |dir| {
                const triple = std.zig.target.glibcRuntimeTriple(b.allocator, t.cpu.arch, t.os.tag, t.abi) catch @panic("out of memory");
                run.setEnvironmentVariable("QEMU_LD_PREFIX", b.pathJoin(&.{ dir, triple }));
            };
        },
        else => {},
    }
}

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.option(std.builtin.OptimizeMode, "optimize", "Optimization mode (default ReleaseFast)") orelse .ReleaseFast;

    const host = addArtifacts(b, target, optimize);
    b.installArtifact(host.shared);
    b.installArtifact(host.extension);
    b.installArtifact(host.static);

    // C tests: every native/test/*.c is one program linked with the static library.
    // For a -Dtarget other than the host (run under qemu-user, release/platforms.mjs)
    // the library is built exactly as the release builds it: the tests then check the
    // released code, and after `zig build release` none of its C is compiled again.
    const test_step = b.step("test", "Build and run the C tests");
    const test_lib = if (target.query.isNative()) host.static else releaseStaticLibrary(b, target);
    var dir = b.build_root.handle.openDir("native/test", .{ .iterate = true }) catch @panic("native/test missing");
    defer dir.close();
    var it = dir.iterate();
    while (it.next() catch @panic("cannot list native/test")) |entry| {
        if (entry.kind != .file or !std.mem.endsWith(u8, entry.name, ".c")) continue;
        const name = entry.name[0 .. entry.name.len - 2];
        const mod = b.createModule(.{ .target = target, .optimize = optimize, .link_libc = true });
        mod.addCSourceFile(.{ .file = b.path(b.fmt("native/test/{s}", .{entry.name})), .flags = &engine_flags });
        addEngineIncludes(b, mod);
        mod.addIncludePath(b.path("native/test"));
        mod.linkLibrary(test_lib);
        const exe = b.addExecutable(.{ .name = b.dupe(name), .root_module = mod });
        b.getInstallStep().dependOn(&b.addInstallArtifact(exe, .{ .dest_dir = .{ .override = .{ .custom = "test" } } }).step);
        const run = b.addRunArtifact(exe);
        run.setCwd(b.path("."));
        run.has_side_effects = true;
        // The process tests load the extension into Debian's sqlite3 shell.
        if (std.mem.eql(u8, name, "test_processes") or std.mem.eql(u8, name, "test_mp")) run.addArtifactArg(host.extension);
        // A build for another target (another libc, or emulated): its extension does
        // not load into the host's sqlite3 shell.
        if (!target.query.isNative()) run.setEnvironmentVariable("MW_TEST_FOREIGN", "1");
        setEmulatorEnv(b, run, target.result);
        test_step.dependOn(&run.step);
    }

    // Fuzz targets: every native/fuzz/fuzz_*.c, linked with replay.c (no libFuzzer) and run
    // over its committed corpus native/fuzz/corpus/<name>/. scripts/fuzz.sh fuzzes them.
    if (b.build_root.handle.openDir("native/fuzz", .{ .iterate = true })) |fuzz_dir_const| {
        var fuzz_dir = fuzz_dir_const;
        defer fuzz_dir.close();
        var fit = fuzz_dir.iterate();
        while (fit.next() catch @panic("cannot list native/fuzz")) |entry| {
            if (entry.kind != .file or !std.mem.startsWith(u8, entry.name, "fuzz_") or !std.mem.endsWith(u8, entry.name, ".c")) continue;
            const name = b.dupe(entry.name[0 .. entry.name.len - 2]);
            const mod = b.createModule(.{ .target = target, .optimize = optimize, .link_libc = true });
            mod.addCSourceFiles(.{ .root = b.path("native/fuzz"), .files = &.{ b.dupe(entry.name), "replay.c" }, .flags = &engine_flags });
            addEngineIncludes(b, mod);
            mod.linkLibrary(host.static);
            const exe = b.addExecutable(.{ .name = b.fmt("{s}_replay", .{name}), .root_module = mod });
            b.getInstallStep().dependOn(&b.addInstallArtifact(exe, .{ .dest_dir = .{ .override = .{ .custom = "test" } } }).step);
            const run = b.addRunArtifact(exe);
            run.addArg(b.fmt("native/fuzz/corpus/{s}", .{name}));
            run.setCwd(b.path("."));
            run.has_side_effects = true;
            test_step.dependOn(&run.step);
        }
    } else |_| {}

    // Native benchmarks: every bench/native/*.c is one program linked with the static library.
    if (b.build_root.handle.openDir("bench/native", .{ .iterate = true })) |bench_dir_const| {
        var bench_dir = bench_dir_const;
        defer bench_dir.close();
        var bit = bench_dir.iterate();
        while (bit.next() catch @panic("cannot list bench/native")) |entry| {
            if (entry.kind != .file or !std.mem.endsWith(u8, entry.name, ".c")) continue;
            const mod = b.createModule(.{ .target = target, .optimize = optimize, .link_libc = true });
            mod.addCSourceFile(.{ .file = b.path(b.fmt("bench/native/{s}", .{entry.name})), .flags = &engine_flags });
            addEngineIncludes(b, mod);
            mod.addIncludePath(b.path("bench/native"));
            mod.linkLibrary(host.static);
            const exe = b.addExecutable(.{ .name = b.dupe(entry.name[0 .. entry.name.len - 2]), .root_module = mod });
            b.installArtifact(exe);
        }
    } else |_| {}

    addRelease(b);
}

// ---------------------------------------------------------------------------
// Release: every target of release_targets, plus Android and iOS. Owned by
// release/ (see release/README.md); the host build above does not depend on it.

/// Targets zig 0.14.1 has no libc for. Without an SDK they get a compile-only check
/// against stand-in headers that zig ships (musl for Android, the macOS SDK headers
/// for iOS); with -Dandroid-ndk / -Dios-sdk / -Dios-simulator-sdk they are built and
/// checked like the others. Android API 24 and iOS 14.0 are the first with pwritev.
const Sdk = enum { android, ios, ios_simulator };
const mobile_targets = [_]struct { name: []const u8, triple: []const u8, sdk: Sdk, ndk_triple: []const u8 = "" }{
    .{ .name = "android-arm64", .triple = "aarch64-linux-android.24", .sdk = .android, .ndk_triple = "aarch64-linux-android" },
    .{ .name = "android-x64", .triple = "x86_64-linux-android.24", .sdk = .android, .ndk_triple = "x86_64-linux-android" },
    .{ .name = "ios-arm64", .triple = "aarch64-ios.14.0", .sdk = .ios },
    .{ .name = "ios-arm64-simulator", .triple = "aarch64-ios.14.0-simulator", .sdk = .ios_simulator },
};

/// Adds flags to every C source of a module (after the ones addModule chose).
fn appendCFlags(b: *std.Build, mod: *std.Build.Module, extra: []const []const u8) void {
    for (mod.link_objects.items) |lo| switch (lo) {
        .c_source_file => |f| f.flags = joinFlags(b, &.{ f.flags, extra }),
        .c_source_files => |f| f.flags = joinFlags(b, &.{ f.flags, extra }),
        else => {},
    };
}

/// Apple platforms mark each call with the OS version that introduced it: a call
/// newer than the minimum version would fail to bind at load time, so it is an error.
fn appleFlags(b: *std.Build, mod: *std.Build.Module) void {
    if (mod.resolved_target.?.result.os.tag.isDarwin()) appendCFlags(b, mod, &.{"-Werror=unguarded-availability-new"});
}

/// The module of sqlite3.c alone, with the flags addModule gives it (the engine
/// sources it also adds are dropped: they go into each library's own module).
fn sqliteOnlyModule(b: *std.Build, target: std.Build.ResolvedTarget, optimize: std.builtin.OptimizeMode) *std.Build.Module {
    const mod = addModule(b, target, optimize, true, false);
    var kept: usize = 0;
    var found = false;
    for (mod.link_objects.items) |lo| {
        switch (lo) {
            .c_source_files => continue,
            .c_source_file => |f| found = found or std.mem.endsWith(u8, f.file.getDisplayName(), "sqlite3.c"),
            else => {},
        }
        mod.link_objects.items[kept] = lo;
        kept += 1;
    }
    if (!found) @panic("release: addModule no longer adds native/sqlite/sqlite3.c as one file");
    mod.link_objects.shrinkRetainingCapacity(kept);
    return mod;
}

/// sqlite3.c alone, compiled as the release compiles it for a target.
fn releaseSqliteObject(b: *std.Build, target: std.Build.ResolvedTarget) *std.Build.Step.Compile {
    const mod = sqliteOnlyModule(b, target, .ReleaseFast);
    mod.strip = true;
    return b.addObject(.{ .name = "sqlite3", .root_module = mod });
}

/// The release's static library of a target (as addReleaseTarget builds it), on its own.
fn releaseStaticLibrary(b: *std.Build, target: std.Build.ResolvedTarget) *std.Build.Step.Compile {
    const mod = addModule(b, target, .ReleaseFast, false, false);
    mod.strip = true;
    appleFlags(b, mod);
    mod.addObject(releaseSqliteObject(b, target));
    return b.addLibrary(.{ .linkage = .static, .name = "mwsqlite3", .root_module = mod });
}

/// Builds the three artifacts of one release target into zig-out/release/<name>/.
/// sqlite3.c is compiled once into an object that both the shared and the static
/// library take (it is most of the build time; COFF cannot merge several sources
/// into one object, so the engine sources are compiled per library). Release
/// artifacts carry no debug information.
fn addReleaseTarget(b: *std.Build, name: []const u8, target: std.Build.ResolvedTarget, libc_file: ?std.Build.LazyPath, check: *std.Build.Step.Run) void {
    const optimize: std.builtin.OptimizeMode = .ReleaseFast;
    const sqlite_obj = releaseSqliteObject(b, target);

    var mods: [3]*std.Build.Module = undefined;
    for (&mods, [_]bool{ false, true, false }) |*m, extension| {
        m.* = addModule(b, target, optimize, false, extension);
        m.*.strip = true;
        appleFlags(b, m.*);
        if (!extension) m.*.addObject(sqlite_obj);
    }
    const shared_mod = mods[0];
    const ext_mod = mods[1];
    const static_mod = mods[2];

    const arts = [_]*std.Build.Step.Compile{
        b.addLibrary(.{ .linkage = .dynamic, .name = "mwsqlite3", .root_module = shared_mod }),
        b.addLibrary(.{ .linkage = .dynamic, .name = "multiwriter", .root_module = ext_mod }),
        b.addLibrary(.{ .linkage = .static, .name = "mwsqlite3", .root_module = static_mod }),
    };
    if (libc_file) |f| sqlite_obj.setLibCFile(f);
    const dest: std.Build.Step.InstallArtifact.Options = .{
        .dest_dir = .{ .override = .{ .custom = b.fmt("release/{s}", .{name}) } },
        .implib_dir = .disabled,
        .pdb_dir = .disabled,
        .h_dir = .disabled,
    };
    for (arts) |art| {
        if (libc_file) |f| art.setLibCFile(f);
        check.step.dependOn(&b.addInstallArtifact(art, dest).step);
    }
    check.addArg(name);
}

/// A zig libc file for an SDK sysroot (the format of `zig libc`).
fn libcFile(b: *std.Build, name: []const u8, include_dir: []const u8, sys_include_dir: []const u8, crt_dir: []const u8) std.Build.LazyPath {
    const wf = b.addWriteFiles();
    return wf.add(b.fmt("libc-{s}.txt", .{name}), b.fmt(
        "include_dir={s}\nsys_include_dir={s}\ncrt_dir={s}\nmsvc_lib_dir=\nkernel32_lib_dir=\ngcc_dir=\n",
        .{ include_dir, sys_include_dir, crt_dir },
    ));
}

/// The sysroot inside an Android NDK: toolchains/llvm/prebuilt/<host>/sysroot.
fn ndkSysroot(b: *std.Build, ndk: []const u8) []const u8 {
    for ([_][]const u8{ "linux-x86_64", "darwin-x86_64", "windows-x86_64" }) |host| {
        const p = b.pathJoin(&.{ ndk, "toolchains", "llvm", "prebuilt", host, "sysroot" });
        std.fs.cwd().access(p, .{}) catch continue;
        return p;
    }
    std.debug.panic("-Dandroid-ndk={s}: no toolchains/llvm/prebuilt/<host>/sysroot in it", .{ndk});
}

/// Compiles SQLite and the engine for a target zig has no libc for, against
/// headers zig ships as a stand-in. It proves the sources compile for the
/// architecture and the OS's code paths (e.g. availability of calls on iOS); it
/// links nothing and produces no release artifact.
fn addStandInCheck(b: *std.Build, name: []const u8, target: std.Build.ResolvedTarget, sdk: Sdk, step: *std.Build.Step) void {
    const t = target.result;
    const inc = b.pathJoin(&.{ b.graph.zig_lib_directory.path orelse ".", "libc", "include" });
    const arch_dir: []const u8 = switch (t.cpu.arch) {
        .aarch64 => "aarch64",
        .x86_64 => "x86_64",
        else => @panic("stand-in check: unsupported architecture"),
    };
    const dirs: []const []const u8 = switch (sdk) {
        .android => &.{ b.fmt("{s}-linux-musl", .{arch_dir}), "generic-musl", b.fmt("{s}-linux-any", .{if (t.cpu.arch == .x86_64) "x86" else arch_dir}), "any-linux-any" },
        .ios, .ios_simulator => &.{"any-macos-any"},
    };
    for ([_]bool{ false, true }) |extension| {
        // Debug without sanitizers: the fastest compile that still type-checks all.
        const mod = addModule(b, target, .Debug, !extension, extension);
        mod.link_libc = false;
        mod.sanitize_c = false;
        appleFlags(b, mod);
        for (dirs) |d| mod.addSystemIncludePath(.{ .cwd_relative = b.pathJoin(&.{ inc, d }) });
        const obj = b.addObject(.{ .name = b.fmt("{s}-{s}", .{ name, if (extension) "extension" else "library" }), .root_module = mod });
        step.dependOn(&obj.step);
    }
}

fn addRelease(b: *std.Build) void {
    const android_ndk = b.option([]const u8, "android-ndk", "Android NDK folder: build the Android release targets with its sysroot");
    const ios_sdk = b.option([]const u8, "ios-sdk", "iPhoneOS.sdk folder: build the iOS device release target with it");
    const ios_sim_sdk = b.option([]const u8, "ios-simulator-sdk", "iPhoneSimulator.sdk folder: build the iOS simulator release target with it");

    const release_step = b.step("release", "Build every release target and check the artifacts");
    const mobile_step = b.step("mobile-check", "Compile-only check of the Android and iOS targets that have no SDK given");
    const check = b.addSystemCommand(&.{"node"});
    check.addFileArg(b.path("release/check-artifacts.mjs"));
    check.addArg(b.getInstallPath(.prefix, "release"));
    check.setCwd(b.path("."));
    check.has_side_effects = true;

    for (release_targets) |rt| {
        const query = std.Target.Query.parse(.{ .arch_os_abi = rt.triple }) catch @panic("bad release triple");
        addReleaseTarget(b, rt.name, b.resolveTargetQuery(query), null, check);
    }

    for (mobile_targets) |mt| {
        const query = std.Target.Query.parse(.{ .arch_os_abi = mt.triple }) catch @panic("bad mobile triple");
        const target = b.resolveTargetQuery(query);
        const libc: ?std.Build.LazyPath = switch (mt.sdk) {
            .android => if (android_ndk) |ndk| blk: {
                const sysroot = ndkSysroot(b, ndk);
                const api = target.result.os.version_range.linux.android;
                break :blk libcFile(
                    b,
                    mt.name,
                    b.pathJoin(&.{ sysroot, "usr", "include" }),
                    b.pathJoin(&.{ sysroot, "usr", "include", mt.ndk_triple }),
                    b.pathJoin(&.{ sysroot, "usr", "lib", mt.ndk_triple, b.fmt("{d}", .{api}) }),
                );
            } else null,
            .ios, .ios_simulator => if (if (mt.sdk == .ios) ios_sdk else ios_sim_sdk) |sdk| libcFile(
                b,
                mt.name,
                b.pathJoin(&.{ sdk, "usr", "include" }),
                b.pathJoin(&.{ sdk, "usr", "include" }),
                b.pathJoin(&.{ sdk, "usr", "lib" }),
            ) else null,
        };
        if (libc) |f| {
            addReleaseTarget(b, mt.name, target, f, check);
        } else {
            addStandInCheck(b, mt.name, target, mt.sdk, mobile_step);
        }
    }
    release_step.dependOn(&check.step);
    release_step.dependOn(mobile_step);

    addPlatformTests(b);
    addEmulatedTests(b);
}

/// The Linux release targets this x86_64 machine runs under qemu-user (or natively,
/// x64 musl). release/platforms.mjs runs their C tests with `zig build test
/// -Dtarget=<triple> -fqemu` and these programs with the released libraries.
const emulated_targets = [_][]const u8{ "linux-arm64-gnu", "linux-x64-musl", "linux-arm64-musl" };

/// `zig build emulated-tests`: dll_smoke and platform_test for each emulated target
/// into zig-out/release-test/<target>/. dll_smoke is linked dynamically on musl too:
/// a static musl program cannot dlopen.
fn addEmulatedTests(b: *std.Build) void {
    const step = b.step("emulated-tests", "Build dll_smoke and platform_test for the Linux targets run under emulation");
    for (emulated_targets) |name| {
        const triple = for (release_targets) |rt| {
            if (std.mem.eql(u8, rt.name, name)) break rt.triple;
        } else @panic("emulated_targets: not a release target");
        const target = b.resolveTargetQuery(std.Target.Query.parse(.{ .arch_os_abi = triple }) catch @panic("bad triple"));
        const dest: std.Build.Step.InstallArtifact.Options = .{ .dest_dir = .{ .override = .{ .custom = b.fmt("release-test/{s}", .{name}) } } };
        for ([_][]const u8{ "dll_smoke", "platform_test" }) |prog| {
            const mod = b.createModule(.{ .target = target, .optimize = .ReleaseSafe, .link_libc = true });
            addEngineIncludes(b, mod);
            if (std.mem.eql(u8, prog, "dll_smoke")) {
                mod.addCSourceFile(.{ .file = b.path("release/test/dll_smoke.c"), .flags = &engine_flags });
            } else {
                mod.addCSourceFiles(.{ .files = &.{ "release/test/platform_test.c", "native/src/platform/platform_posix.c" }, .flags = &engine_flags });
            }
            if (target.result.isGnuLibC()) {
                mod.linkSystemLibrary("dl", .{});
                mod.linkSystemLibrary("pthread", .{});
            }
            const exe = b.addExecutable(.{ .name = prog, .root_module = mod, .linkage = .dynamic });
            step.dependOn(&b.addInstallArtifact(exe, dest).step);
        }
    }
}

/// The release's own test programs:
///   platform-test   release/test/platform_test.c against the host's platform.h
///                   implementation, run;
///   release-tests   into zig-out/release-test/: platform_test.exe (platform_win.c),
///                   dll_smoke.exe and the host's dll_smoke, which load released
///                   libraries at run time (release/check.mjs runs them, the Windows
///                   ones under Wine when it is installed).
fn addPlatformTests(b: *std.Build) void {
    const host_step = b.step("platform-test", "Build and run the platform.h contract test on the host");
    const tests_step = b.step("release-tests", "Build the release test programs into zig-out/release-test/");
    const win = b.resolveTargetQuery(std.Target.Query.parse(.{ .arch_os_abi = "x86_64-windows-gnu" }) catch unreachable);
    const dest: std.Build.Step.InstallArtifact.Options = .{ .dest_dir = .{ .override = .{ .custom = "release-test" } }, .pdb_dir = .disabled };
    for ([_]std.Build.ResolvedTarget{ b.graph.host, win }) |target| {
        const t = target.result;
        const windows = t.os.tag == .windows;
        const glibc = t.os.tag == .linux and t.abi.isGnu();
        const platform = b.createModule(.{ .target = target, .optimize = .ReleaseSafe, .link_libc = true });
        const smoke = b.createModule(.{ .target = target, .optimize = .ReleaseSafe, .link_libc = true });
        for ([_]*std.Build.Module{ platform, smoke }) |m| {
            addEngineIncludes(b, m);
        }
        platform.addCSourceFiles(.{
            .files = &.{ "release/test/platform_test.c", if (windows) "native/src/platform/platform_win.c" else "native/src/platform/platform_posix.c" },
            .flags = &engine_flags,
        });
        smoke.addCSourceFile(.{ .file = b.path("release/test/dll_smoke.c"), .flags = &engine_flags });
        if (glibc) {
            platform.linkSystemLibrary("pthread", .{});
            smoke.linkSystemLibrary("pthread", .{});
            smoke.linkSystemLibrary("dl", .{});
        }
        const platform_exe = b.addExecutable(.{ .name = "platform_test", .root_module = platform });
        const smoke_exe = b.addExecutable(.{ .name = "dll_smoke", .root_module = smoke });
        tests_step.dependOn(&b.addInstallArtifact(smoke_exe, dest).step);
        if (windows) {
            tests_step.dependOn(&b.addInstallArtifact(platform_exe, dest).step);
        } else {
            const run = b.addRunArtifact(platform_exe);
            _ = run.addOutputDirectoryArg("scratch"); // where the test creates and deletes its files
            run.has_side_effects = true;
            host_step.dependOn(&run.step);
        }
    }
}
