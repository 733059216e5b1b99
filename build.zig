//! The native build of sqlite-multiwriter. `zig build` produces, for the host:
//!   lib/libmwsqlite3.{so,dylib} / mwsqlite3.dll   SQLite + the engine, VFS registered at start
//!   lib/libmultiwriter.{so,dylib} / multiwriter.dll the loadable extension, without SQLite
//!   lib/libmwsqlite3.a                             the static library (SQLite + engine)
//! `zig build test` builds and runs the C tests of native/test.
//! `zig build release` builds every release target into zig-out/release/<target>/ and
//! checks each artifact (release/check-artifacts.mjs).
const std = @import("std");

/// SQLite compile options, chosen on purpose (docs/design.md explains each).
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

fn engineSources(b: *std.Build) []const []const u8 {
    var list = std.ArrayList([]const u8).init(b.allocator);
    var dir = b.build_root.handle.openDir("native/src", .{ .iterate = true }) catch @panic("native/src missing");
    defer dir.close();
    var it = dir.iterate();
    while (it.next() catch @panic("cannot list native/src")) |entry| {
        if (entry.kind == .file and std.mem.endsWith(u8, entry.name, ".c")) {
            list.append(b.dupe(entry.name)) catch @panic("out of memory");
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
    mod.addIncludePath(b.path("native/include"));
    mod.addIncludePath(b.path("native/src"));
    mod.addIncludePath(b.path("native/sqlite"));
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

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.option(std.builtin.OptimizeMode, "optimize", "Optimization mode (default ReleaseFast)") orelse .ReleaseFast;

    const host = addArtifacts(b, target, optimize);
    b.installArtifact(host.shared);
    b.installArtifact(host.extension);
    b.installArtifact(host.static);

    // C tests: every native/test/*.c is one program linked with the static library.
    const test_step = b.step("test", "Build and run the C tests");
    var dir = b.build_root.handle.openDir("native/test", .{ .iterate = true }) catch @panic("native/test missing");
    defer dir.close();
    var it = dir.iterate();
    while (it.next() catch @panic("cannot list native/test")) |entry| {
        if (entry.kind != .file or !std.mem.endsWith(u8, entry.name, ".c")) continue;
        const name = entry.name[0 .. entry.name.len - 2];
        const mod = b.createModule(.{ .target = target, .optimize = optimize, .link_libc = true });
        mod.addCSourceFile(.{ .file = b.path(b.fmt("native/test/{s}", .{entry.name})), .flags = &engine_flags });
        mod.addIncludePath(b.path("native/include"));
        mod.addIncludePath(b.path("native/src"));
        mod.addIncludePath(b.path("native/sqlite"));
        mod.addIncludePath(b.path("native/test"));
        mod.linkLibrary(host.static);
        const exe = b.addExecutable(.{ .name = b.dupe(name), .root_module = mod });
        b.getInstallStep().dependOn(&b.addInstallArtifact(exe, .{ .dest_dir = .{ .override = .{ .custom = "test" } } }).step);
        const run = b.addRunArtifact(exe);
        run.setCwd(b.path("."));
        run.has_side_effects = true;
        test_step.dependOn(&run.step);
    }

    // Native benchmarks: every bench/native/*.c is one program linked with the static library.
    if (b.build_root.handle.openDir("bench/native", .{ .iterate = true })) |bench_dir_const| {
        var bench_dir = bench_dir_const;
        defer bench_dir.close();
        var bit = bench_dir.iterate();
        while (bit.next() catch @panic("cannot list bench/native")) |entry| {
            if (entry.kind != .file or !std.mem.endsWith(u8, entry.name, ".c")) continue;
            const mod = b.createModule(.{ .target = target, .optimize = optimize, .link_libc = true });
            mod.addCSourceFile(.{ .file = b.path(b.fmt("bench/native/{s}", .{entry.name})), .flags = &engine_flags });
            mod.addIncludePath(b.path("native/include"));
            mod.addIncludePath(b.path("native/src"));
            mod.addIncludePath(b.path("native/sqlite"));
            mod.addIncludePath(b.path("bench/native"));
            mod.linkLibrary(host.static);
            const exe = b.addExecutable(.{ .name = b.dupe(entry.name[0 .. entry.name.len - 2]), .root_module = mod });
            b.installArtifact(exe);
        }
    } else |_| {}

    // Every release target, then the artifact checks.
    const release_step = b.step("release", "Build every release target and check the artifacts");
    const check = b.addSystemCommand(&.{ "node", "release/check-artifacts.mjs", "zig-out/release" });
    for (release_targets) |rt| {
        const query = std.Target.Query.parse(.{ .arch_os_abi = rt.triple }) catch @panic("bad release triple");
        const a = addArtifacts(b, b.resolveTargetQuery(query), .ReleaseFast);
        const dest: std.Build.Step.InstallArtifact.Options = .{
            .dest_dir = .{ .override = .{ .custom = b.fmt("release/{s}", .{rt.name}) } },
            .implib_dir = .disabled,
            .pdb_dir = .disabled,
            .h_dir = .disabled,
        };
        for ([_]*std.Build.Step.Compile{ a.shared, a.extension, a.static }) |art| {
            const inst = b.addInstallArtifact(art, dest);
            check.step.dependOn(&inst.step);
        }
    }
    release_step.dependOn(&check.step);
}
