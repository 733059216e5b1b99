// lib/turn.ts: the retry turn of transactionAsync's pool (async.ts). On one event loop every
// transaction in flight may lose its commit to another one of the same loop, and run again
// at once they meet again and lose again together: a shop whose items sit on 4 leaf pages ran
// each order 19 times (40 on a hot item). So a run that lost its commit waits for the turn
// (one at a time, in order of arrival) and runs again holding it; a holder that lost again
// while holding it also keeps new first attempts waiting until it ends, so that newcomers
// cannot make it lose forever. Transactions that never lose never wait, except behind such a
// holder. The engine's own turn (native core/turn.c) does this for threads; pooled lanes of
// an event loop keep out of its waits, which would block the loop.
// Owns the turn and its queues. Never touches a connection.

export class RetryTurn {
  #held = false;
  #queue: (() => void)[] = []; // runs that lost, waiting for the turn
  #closedGate = false;
  #atGate: (() => void)[] = []; // first attempts waiting behind a holder that keeps losing

  /** Before a first attempt: resolves at once unless a losing holder closed the gate. */
  admit(): Promise<void> | null {
    if (!this.#closedGate) return null;
    return new Promise((resolve) => this.#atGate.push(resolve));
  }

  /** Before running again after a loss: the turn, in order of arrival. */
  take(): Promise<void> {
    if (!this.#held) {
      this.#held = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#queue.push(resolve));
  }

  /** The holder lost again: new first attempts wait until it ends. */
  closeGate(): void {
    this.#closedGate = true;
  }

  /** The holder ended (committed, failed, gave up): the gate opens, the next in line holds. */
  release(): void {
    this.#openGate();
    const next = this.#queue.shift();
    if (next !== undefined) next();
    else this.#held = false;
  }

  /** Everyone waiting goes on (the pool closed: their runs then reject). */
  drain(): void {
    this.#openGate();
    for (const w of this.#queue.splice(0)) w();
    this.#held = false;
  }

  /** Runs waiting for the turn or at the gate (tests, statistics). */
  get waiting(): number {
    return this.#queue.length + this.#atGate.length;
  }

  #openGate(): void {
    this.#closedGate = false;
    for (const w of this.#atGate.splice(0)) w();
  }
}
