// lib/turn.ts: the retry turn of transactionAsync's pool (async.ts). On one event loop every
// transaction in flight may lose its commit to another one of the same loop, and run again
// at once they meet again and lose again together: a shop whose items sit on 4 leaf pages ran
// each order 19 times (40 on a hot item). So a run that lost its commit waits for the turn
// (in order of arrival) and runs again holding it; a holder that lost again while holding it
// also keeps new first attempts waiting until it ends, so that newcomers cannot make it lose
// forever. Transactions that never lose never wait, except behind such a holder.
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
  #atGate: Waiter[] = []; // first attempts waiting behind them

  /** Before a first attempt: at once unless a losing holder closed the gate. */
  admit(): Promise<boolean> | null {
    if (this.#gateClosers === 0) return null;
    return this.#wait(this.#atGate);
  }

  /** Before running again after a loss: a Hold once this run holds the turn (in order of
   * arrival), null when the wait ran out (the run goes on without it). */
  async take(): Promise<Hold | null> {
    let granted = true;
    if (this.#holders + 1 <= this.#width && this.#queue.length === 0) this.#holders++;
    else granted = await this.#wait(this.#queue); // a grant counts the holder
    return granted ? this.#hold() : null;
  }

  /** Everyone waiting goes on (the pool closed: their runs then reject). */
  drain(): void {
    this.#drained = true;
    this.#gateClosers = 0;
    this.#openGate();
    for (const w of this.#queue.splice(0)) w(false);
    this.#holders = 0;
  }

  /** Runs waiting for the turn or at the gate (tests, statistics). */
  get waiting(): number {
    return this.#queue.length + this.#atGate.length;
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
        if (closedGate && --this.#gateClosers === 0) this.#openGate();
        this.#holders--;
        while (this.#holders + 1 <= this.#width && this.#queue.length > 0) {
          this.#holders++;
          this.#queue.shift()!(true);
        }
      },
    };
  }

  #openGate(): void {
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
