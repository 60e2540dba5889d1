package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"
)

// Group commit: writes that arrive while every write lane is busy queue, and the next free lane runs
// everything queued as one transaction (one BEGIN and one COMMIT for many writes). Each write runs in a
// savepoint of its own, so one write's failure (a taken name, a stale If-Match, a missing reference) rolls
// back that write alone. Every caller returns only after the transaction holding its write has committed,
// with its own result. A write that finds a lane free runs at once, alone, in a transaction of its own, as
// before: there is no timer, and a lone writer waits for nothing.
//
// There are as many lanes as write connections: one on SQLite (one writer), the pool's size on PostgreSQL,
// so that writes there still run side by side on the server as before, and group only when they would
// otherwise wait for a connection.

// defaultMaxGroup caps the writes of one transaction.
const defaultMaxGroup = 64

// writeFunc is the body of one write: it runs inside a transaction, and must keep no effect outside it
// that a second run would not overwrite (a write whose group fails before committing runs again, alone).
type writeFunc func(ctx context.Context, tx bun.Tx) error

// pendingWrite is one caller's write, queued until a lane takes it.
type pendingWrite struct {
	ctx context.Context
	fn  writeFunc
	err error
	// panicked is what fn panicked with, if it did: run recovers it, and the caller panics with it.
	panicked any
	// done is closed once err is final.
	done chan struct{}
	// lead hands this write's caller a group to run (with its own write first).
	lead chan []*pendingWrite
}

func (w *pendingWrite) finish(err error) {
	w.err = err
	close(w.done)
}

// errPanicked stands for a write whose fn panicked (its caller panics with the value instead).
var errPanicked = errors.New("store: write panicked")

// call runs w.fn, recovering a panic: fn may be another caller's, and a panic here would strand the group.
func (w *pendingWrite) call(ctx context.Context, tx bun.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.panicked, err = r, errPanicked
		}
	}()
	return w.fn(ctx, tx)
}

// committer runs writes on db, grouping those that queue behind busy lanes.
type committer struct {
	db       *bun.DB
	maxGroup int
	// off runs every write in a transaction of its own, however many run at once.
	off bool

	mu    sync.Mutex
	free  int // lanes with no transaction running
	queue []*pendingWrite

	// shared counts the transactions that held more than one write (read by tests).
	shared atomic.Int64
}

// newCommitter returns a committer with the given number of lanes; lanes <= 0 turns grouping off (every
// write is a transaction of its own, however many run at once).
func newCommitter(db *bun.DB, lanes int) *committer {
	return &committer{db: db, maxGroup: defaultMaxGroup, free: lanes, off: lanes <= 0}
}

// write runs fn in a transaction, alone when a lane is free, else in the next group, and returns once that
// transaction has committed (or failed).
func (c *committer) write(ctx context.Context, fn writeFunc) error {
	return c.writeOr(ctx, fn, nil)
}

// writeOr is write for a write that can also run without a transaction of its own: alone, when not nil,
// does on the database what fn does in a transaction, atomically by itself (one statement, or on
// PostgreSQL one query string of several, which the server runs as one implicit transaction). It runs
// instead of fn when the write would be a transaction alone (a lane is free, or grouping is off), saving
// the round trips of BEGIN and COMMIT; a write that queues runs fn in its group as any other.
func (c *committer) writeOr(ctx context.Context, fn writeFunc, alone func(ctx context.Context) error) error {
	runAlone := func() error {
		if alone != nil {
			return alone(ctx)
		}
		return c.db.RunInTx(ctx, nil, fn)
	}
	if c.off {
		return runAlone()
	}
	c.mu.Lock()
	if c.free > 0 {
		c.free--
		c.mu.Unlock()
		defer c.handOff() // even when fn panics
		return runAlone()
	}
	w := &pendingWrite{ctx: ctx, fn: fn, done: make(chan struct{}), lead: make(chan []*pendingWrite, 1)}
	c.queue = append(c.queue, w)
	c.mu.Unlock()
	select {
	case <-w.done:
	case group := <-w.lead:
		c.run(group)
		c.handOff()
	}
	if w.panicked != nil {
		panic(w.panicked) // in the caller's goroutine, as a write alone would
	}
	return w.err
}

// handOff passes the lane that just finished to the first queued write, with the queue (up to maxGroup
// writes) as its group, or frees the lane when nothing waits.
func (c *committer) handOff() {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.free++
		c.mu.Unlock()
		return
	}
	n := min(len(c.queue), c.maxGroup)
	group := make([]*pendingWrite, n)
	copy(group, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	c.mu.Unlock()
	group[0].lead <- group
}

// run runs a group: alone when it is one write, else in one transaction with a savepoint per write. When
// the shared transaction breaks before its commit (a savepoint cannot be taken or rolled back), nothing of
// it is kept and each write runs again alone.
func (c *committer) run(group []*pendingWrite) {
	live := group[:0:0]
	for _, w := range group {
		// A caller that gave up while queued gets its error; its write never runs.
		if err := w.ctx.Err(); err != nil {
			w.finish(err)
			continue
		}
		live = append(live, w)
	}
	if len(live) == 1 {
		live[0].finish(c.db.RunInTx(live[0].ctx, nil, live[0].call))
		return
	}
	if len(live) == 0 {
		return
	}
	results, retry, ok := c.runShared(live)
	if ok {
		c.shared.Add(1)
	}
	for i, w := range live {
		switch {
		case !ok || retry[i]:
			w.panicked = nil
			w.finish(c.db.RunInTx(w.ctx, nil, w.call))
		default:
			w.finish(results[i])
		}
	}
}

// runShared runs the writes in one transaction, each in a savepoint. It returns each write's result, which
// writes must run again alone (a deadlock or serialization failure is the group's doing, not the write's),
// and false when the transaction broke before it committed. A failed COMMIT is every write's result: it
// may have committed, so nothing runs again.
func (c *committer) runShared(group []*pendingWrite) (results []error, retry []bool, ok bool) {
	// No one caller's cancellation may roll back the others' writes: the shared transaction and its
	// statements run without cancellation (each caller's context still carries its values, such as the
	// trace). They are bounded by the database's own timeouts.
	ctx := context.WithoutCancel(group[0].ctx)
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, false
	}
	results = make([]error, len(group))
	retry = make([]bool, len(group))
	for i, w := range group {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT qleet_write"); err != nil {
			_ = tx.Rollback()
			return nil, nil, false
		}
		err := w.call(context.WithoutCancel(w.ctx), tx)
		if err != nil {
			if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT qleet_write"); rerr != nil {
				_ = tx.Rollback()
				return nil, nil, false
			}
			results[i], retry[i] = err, isGroupConflict(err)
		}
		if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT qleet_write"); err != nil {
			_ = tx.Rollback()
			return nil, nil, false
		}
	}
	if err := tx.Commit(); err != nil {
		for i := range results {
			if results[i] == nil {
				results[i] = err
			}
			retry[i] = false
		}
	}
	return results, retry, true
}

// isGroupConflict reports whether err is PostgreSQL's deadlock or serialization failure: two groups
// holding each other's rows is the grouping's doing, so the write that lost runs again alone.
func isGroupConflict(err error) bool {
	var pe pgdriver.Error
	if errors.As(err, &pe) {
		switch pe.Field('C') {
		case "40P01", "40001":
			return true
		}
	}
	return false
}
