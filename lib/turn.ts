// lib/turn.ts: the retry turn of transactionAsync's pool (async.ts). On one event loop every
// transaction in flight may lose its commit to another one of the same loop, and run again
// at once they meet again and lose again together: a shop whose items sit on 4 leaf pages ran
// each order 19 times (40 on a hot item). So a run that lost its commit waits for the turn
// (in order of arrival) and runs again holding it; a holder that lost again while holding it
// also closes the gate until it ends: new first attempts then wait in the same queue, behind
// the runs that lost, and run holding the turn in their order of arrival, so that newcomers
// can neither make it lose forever nor overtake the runs queued before them (released all at
// once, the newcomers of a hot row met again and kept the queue's runs losing: the shop's hot
// item answered some orders only after 0.5 s). Transactions that never lose never wait,
// except while such a holder keeps the gate closed.
// The turn is a window, as TCP's congestion window is: it admits `width` holders at once
// (at first one), grows by one per window of holders that committed at their first run
// holding it while others waited, and halves when a holder lost again (below two holders
// it closes the gate instead). Where losers conflict with each other (every order on one hot
// item) it stays near one; where they rarely do (requests on many rows, each with a 5 ms
// await) it opens, and losers no longer queue one await behind another.
// The engine's own turn (native core/turn.c) does this for threads; pooled lanes of an event
// loop keep out of its waits, which would block the loop. Every wait is bounded (WAIT_MS), as
// the engine's are: a holder whose fn awaits another call of the same pool (which may need the
// turn, or stand at the gate) delays that call, never deadlocks it.
// Owns the turn and its queues. Never touches a connection.

/** The longest wait for the turn or at the gate (ms); then the run goes on without it. */
export const WAIT_MS = 1000;

/** The most holders at once. */
export const MAX_WIDTH = 16;

type Waiter = (granted: boolean) => void;

/** One run's hold on the turn. */
export interface Hold {
  /** The run lost its commit again while holding: fewer holders from now on. */
  lost(): void;
  /** The run ended (committed, failed, gave up): the next in line may hold. */
  release(): void;
}

export class RetryTurn {
  #width = 1;
  #holders = 0;
  #queue: Waiter[] = []; // runs that lost, waiting for the turn
  #gateClosers = 0; // holders that lost again with the window below two
  #drained = false;

  /** Before a first attempt: null (run at once) unless a losing holder closed the gate; then
   * the run waits for the turn like a run that lost, and its first attempt holds it. */
  admit(): Promise<Hold | null> | null {
    if (this.#gateClosers === 0) return null;
    return this.take();
  }

  /** Before running again after a loss: a Hold once this run holds the turn (in order of
   * arrival), null when the wait ran out (the run goes on without it). */
  async take(): Promise<Hold | null> {
    let granted = true;
    if (this.#holders + 1 <= this.#width && this.#queue.length === 0) this.#holders++;
    else granted = await this.#wait(); // a grant counts the holder
    return granted ? this.#hold() : null;
  }

  /** Everyone waiting goes on (the pool closed: their runs then reject). */
  drain(): void {
    this.#drained = true;
    this.#gateClosers = 0;
    for (const w of this.#queue.splice(0)) w(false);
    this.#holders = 0;
  }

  /** Runs waiting for the turn, after a loss or behind the closed gate (tests, statistics). */
  get waiting(): number {
    return this.#queue.length;
  }

  #hold(): Hold {
    let lostAgain = false, closedGate = false, ended = false;
    return {
      lost: () => {
        if (ended || this.#drained) return;
        lostAgain = true;
        if (this.#width >= 2) this.#width /= 2;
        else if (!closedGate) closedGate = true, this.#gateClosers++;
      },
      release: () => {
        if (ended || this.#drained) return;
        ended = true;
        // One more holder per window of holders that committed while others waited (a
        // window that nobody waits for says nothing of how wide it could be).
        if (!lostAgain && this.#queue.length > 0) this.#width = Math.min(MAX_WIDTH, this.#width + 1 / this.#width);
        if (closedGate) this.#gateClosers--;
        this.#holders--;
        while (this.#holders + 1 <= this.#width && this.#queue.length > 0) {
          this.#holders++;
          this.#queue.shift()!(true);
        }
      },
    };
  }

  /** Joins the queue until woken or WAIT_MS passed (then it leaves the queue). */
  #wait(): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const i = this.#queue.indexOf(waiter);
        if (i >= 0) this.#queue.splice(i, 1);
        resolve(false);
      }, WAIT_MS);
      const waiter: Waiter = (granted) => {
        clearTimeout(timer);
        resolve(granted);
      };
      this.#queue.push(waiter);
    });
  }
}
