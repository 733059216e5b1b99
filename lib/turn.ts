// lib/turn.ts: the retry turn of transactionAsync's pool (async.ts). On one event loop every
// transaction in flight may lose its commit to another one of the same loop, and run again
// at once they meet again and lose again together: a shop whose items sit on 4 leaf pages ran
// each order 19 times (40 on a hot item). So a run that lost its commit waits for the turn
// (one at a time, in order of arrival) and runs again holding it; a holder that lost again
// while holding it also keeps new first attempts waiting until it ends, so that newcomers
// cannot make it lose forever. Transactions that never lose never wait, except behind such a
// holder. The engine's own turn (native core/turn.c) does this for threads; pooled lanes of
// an event loop keep out of its waits, which would block the loop. Every wait is bounded
// (WAIT_MS), as the engine's are: a holder whose fn awaits another call of the same pool
// (which may need the turn, or stand at the gate) delays that call, never deadlocks it.
// Owns the turn and its queues. Never touches a connection.

/** The longest wait for the turn or at the gate (ms); then the run goes on without it. */
export const WAIT_MS = 1000;

type Waiter = (granted: boolean) => void;

export class RetryTurn {
  #held = false;
  #queue: Waiter[] = []; // runs that lost, waiting for the turn
  #closedGate = false;
  #atGate: Waiter[] = []; // first attempts waiting behind a holder that keeps losing

  /** Before a first attempt: at once unless a losing holder closed the gate. */
  admit(): Promise<boolean> | null {
    if (!this.#closedGate) return null;
    return this.#wait(this.#atGate);
  }

  /** Before running again after a loss: true once this run holds the turn (in order of
   * arrival), false when the wait ran out (the run goes on without it). */
  take(): Promise<boolean> {
    if (!this.#held) {
      this.#held = true;
      return Promise.resolve(true);
    }
    return this.#wait(this.#queue);
  }

  /** The holder lost again: new first attempts wait until it ends. */
  closeGate(): void {
    this.#closedGate = true;
  }

  /** The holder ended (committed, failed, gave up): the gate opens, the next in line holds. */
  release(): void {
    this.#openGate();
    const next = this.#queue.shift();
    if (next !== undefined) next(true);
    else this.#held = false;
  }

  /** Everyone waiting goes on (the pool closed: their runs then reject). */
  drain(): void {
    this.#openGate();
    for (const w of this.#queue.splice(0)) w(false);
    this.#held = false;
  }

  /** Runs waiting for the turn or at the gate (tests, statistics). */
  get waiting(): number {
    return this.#queue.length + this.#atGate.length;
  }

  #openGate(): void {
    this.#closedGate = false;
    for (const w of this.#atGate.splice(0)) w(true);
  }

  /** Joins a queue until woken or WAIT_MS passed (then it leaves the queue). */
  #wait(queue: Waiter[]): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const i = queue.indexOf(waiter);
        if (i >= 0) queue.splice(i, 1);
        resolve(false);
      }, WAIT_MS);
      const waiter: Waiter = (granted) => {
        clearTimeout(timer);
        resolve(granted);
      };
      queue.push(waiter);
    });
  }
}
