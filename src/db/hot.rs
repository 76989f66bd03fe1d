//! Connections for the one-statement reads and writes every MCP request
//! makes (looking up the user's connection, issuing a ticket), kept idle
//! per thread beside sqlx's pool rather than in it. Two reasons, both
//! measured (BENCHMARKS.md):
//!
//! - sqlx's pool checks every connection it takes back with a round trip to
//!   Postgres (a `ping` on release), in case the future using it was dropped
//!   halfway through a statement. On a one-statement request that doubles
//!   the round trips. Here a connection goes back to the idle list only when
//!   its statement ran to completion and succeeded; one whose request was
//!   cancelled mid-statement, or that failed, is closed instead.
//! - A socket is watched by the reactor of the thread that opened it: a
//!   connection opened by one actix worker and used by another costs a
//!   cross-thread wake-up for every reply. Idle lists are per thread, so a
//!   connection stays with the worker that uses it.
//!
//! At most `limit` connections are open here at once, across threads;
//! beyond that (and for transactions, which always use the pool) the
//! shared pool serves, with its own limit.
//!
//! Places move between threads. Which thread opened how many connections
//! depends on the load's history (a burst on one worker), and a thread
//! keeps its idle ones for a minute: one worker could sit on seven places
//! while the other, with as many requests, found every place taken and
//! sent a quarter of its statements to the pool (measured, bench/NOTES.md).
//! So a thread that finds no place says so, and a thread that then gives
//! a connection back while another of its own has been idle for a second
//! (`SPARE_AFTER`) closes that one, freeing its place — at most one every
//! 500 ms per thread (`GIVE_BACK_EVERY`), since each move costs Postgres a
//! new backend.
//!
//! A thread whose places are all in use by its own requests waits for one
//! of them rather than going to the pool, as long as fewer statements are
//! waiting than it has connections out: each waiter is then served by the
//! next statement to finish, within a statement's time, where the pool
//! would cost a round trip more (its check on return). A longer queue, or
//! a wait past `WAIT_FOR_OWN` (a slow statement), goes to the pool.

use std::{
    cell::{Cell, RefCell},
    collections::VecDeque,
    ops::{Deref, DerefMut},
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::sync::oneshot;

use sqlx::{
    ConnectOptions, Connection, PgConnection, PgPool, Postgres, pool::PoolConnection,
    postgres::PgConnectOptions,
};

/// An idle connection older than this is closed rather than reused: a
/// firewall or proxy may have dropped it silently, and a burst's extra
/// connections must not keep places another thread could use for long.
/// (Shorter would make a quiet instance reconnect for most requests.)
const MAX_IDLE: Duration = Duration::from_secs(60);
/// Connections are replaced after this long, as the pool's are.
const MAX_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// Unless [`HotConnections::with_connect_timeout`] says otherwise.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A thread gives a place back only for a connection that has been idle
/// this long: idle connections are reused newest first, so one that
/// waited a whole second is more than the thread's load needs. (A thread
/// that merely had one idle for a moment keeps it: giving back places at
/// every dip made the threads trade them to and fro, a new Postgres
/// backend each time.)
const SPARE_AFTER: Duration = Duration::from_secs(1);
/// And at most this often: rebalancing a handful of places takes a few
/// seconds, and nothing can make Postgres start backends faster than this.
const GIVE_BACK_EVERY: Duration = Duration::from_millis(500);
/// How long a statement waits for one of its thread's connections to come
/// back before the pool serves it. A statement takes tens of microseconds
/// and a waiter is first in line for the next one to finish, so this is
/// reached only behind a slow statement.
const WAIT_FOR_OWN: Duration = Duration::from_millis(2);

/// The per-thread connections of one database (one per application: tests
/// run several side by side in one process).
#[derive(Clone)]
pub struct HotConnections {
    shared: Arc<Shared>,
    pool: PgPool,
}

struct Shared {
    options: PgConnectOptions,
    /// Opening a connection gives up after this long (then the pool serves).
    connect_timeout: Duration,
    /// [`WAIT_FOR_OWN`] unless a test says otherwise.
    wait_for_own: Duration,
    limit: usize,
    max_idle: Duration,
    /// [`SPARE_AFTER`] unless a test says otherwise.
    spare_after: Duration,
    open: AtomicUsize,
    /// Statements the pool served because every place here was taken.
    overflowed: AtomicU64,
    /// A thread found every place taken since a place was last given back.
    /// Its own allocation, shared by every connection: reading it on each
    /// return writes no reference count.
    wanted: Arc<AtomicBool>,
}

impl Shared {
    fn reserve(self: &Arc<Self>) -> Option<Slot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::downgrade(self)))
    }
}

/// One of the `limit` places, given back when the connection is closed or
/// dropped, whatever the thread.
struct Slot(Weak<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            shared.open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

struct Own {
    conn: PgConnection,
    slot: Slot,
    opened: Instant,
    /// Its database's idle limit, kept here so that checking an idle
    /// connection touches nothing shared between threads.
    max_idle: Duration,
    /// Its database's [`Shared::spare_after`], for the same reason.
    spare_after: Duration,
    /// Its database's [`Shared::wanted`].
    wanted: Arc<AtomicBool>,
}

struct Idle {
    own: Own,
    since: Instant,
}

/// A statement of this thread waiting for a connection of its database
/// (`home`, the address of its [`Shared`]) to be given back.
struct Waiter {
    home: *const Shared,
    handoff: oneshot::Sender<Own>,
}

/// The receiving end of a [`Waiter`]. A connection handed over just as the
/// wait ended (past its time, or its request cancelled) is given back, not
/// dropped.
struct Waiting(oneshot::Receiver<Own>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.close();
        if let Ok(own) = self.0.try_recv() {
            give_back(own);
        }
    }
}

/// How many connections of one database this thread has out now.
struct Lent {
    /// Keeps the allocation, so no other database's `Shared` can take
    /// its address while this entry exists.
    home: Weak<Shared>,
    count: Arc<AtomicUsize>,
}

thread_local! {
    static IDLE: RefCell<Vec<Idle>> = const { RefCell::new(Vec::new()) };
    /// Oldest first.
    static WAITING: RefCell<VecDeque<Waiter>> = const { RefCell::new(VecDeque::new()) };
    static LENT: RefCell<Vec<Lent>> = const { RefCell::new(Vec::new()) };
    /// When this thread last gave a place back to another.
    static GAVE_BACK: Cell<Option<Instant>> = const { Cell::new(None) };
}

impl HotConnections {
    /// Up to `limit` connections opened with `options`; `pool` serves
    /// whatever does not fit.
    pub fn new(options: PgConnectOptions, limit: usize, pool: PgPool) -> Self {
        Self::with_max_idle(options, limit, pool, MAX_IDLE)
    }

    /// [`Self::new`] with another idle limit (tests).
    pub fn with_max_idle(
        options: PgConnectOptions,
        limit: usize,
        pool: PgPool,
        max_idle: Duration,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                options,
                connect_timeout: DEFAULT_CONNECT_TIMEOUT,
                wait_for_own: WAIT_FOR_OWN,
                limit,
                max_idle,
                spare_after: SPARE_AFTER,
                open: AtomicUsize::new(0),
                overflowed: AtomicU64::new(0),
                wanted: Arc::new(AtomicBool::new(false)),
            }),
            pool,
        }
    }

    /// Gives up opening a connection after `timeout` (a frozen server
    /// accepts the socket and never answers); the pool serves instead.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.connect_timeout = timeout;
        }
        self
    }

    /// How long a statement waits for one of its thread's connections
    /// before the pool serves it (2 ms unless set here; tests make it longer).
    pub fn with_wait_for_own(mut self, wait: Duration) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.wait_for_own = wait;
        }
        self
    }

    /// How long an idle connection must have waited unused before its
    /// thread gives its place to one that found none (1 s unless set here;
    /// tests make it longer, so that their own steps never reach it).
    pub fn with_spare_after(mut self, idle_for: Duration) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.spare_after = idle_for;
        }
        self
    }

    /// How many are open now (idle or in use), for tests and diagnostics.
    pub fn open(&self) -> usize {
        self.shared.open.load(Ordering::Acquire)
    }

    /// Runs `statement` on a connection of this thread: acquires one, and
    /// gives it back for reuse only if the statement ran to completion and
    /// succeeded. (Dropped mid-statement, as when the request is cancelled,
    /// the connection is closed.)
    pub async fn run<T>(
        &self,
        statement: impl AsyncFnOnce(&mut PgConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T, sqlx::Error> {
        let mut conn = self.acquire().await?;
        let result = statement(&mut conn).await;
        conn.finish(&result);
        result
    }

    /// A connection for one statement. Pass the statement's result to
    /// [`HotConnection::finish`]; a connection dropped without it (the
    /// request was cancelled) is closed. [`Self::run`] does all this.
    pub async fn acquire(&self) -> Result<HotConnection, sqlx::Error> {
        if let Some(own) = self.take_idle() {
            return Ok(self.lend(own));
        }
        if let Some(slot) = self.shared.reserve() {
            return self.open_own(slot).await;
        }
        // Every place is taken (in use, or idle on another thread). Read
        // before written: while nobody gives a place back, the flag's
        // cache line stays shared between the threads.
        if !self.shared.wanted.load(Ordering::Relaxed) {
            self.shared.wanted.store(true, Ordering::Relaxed);
        }
        // Boxed: waiting is the exception, and inline its state would make
        // every statement's future larger (see `open_own`).
        if let Some(own) = Box::pin(self.wait_for_own()).await {
            return Ok(self.lend(own));
        }
        // A connection closed meanwhile (after a failed statement) frees
        // its place.
        if let Some(slot) = self.shared.reserve() {
            return self.open_own(slot).await;
        }
        // The pool serves, at the price of its check on return. Counted so
        // that an operator can see a `database_max_connections` too small
        // for the load.
        self.shared.overflowed.fetch_add(1, Ordering::Relaxed);
        self.pooled().await
    }

    /// A new connection in `slot`; the pool serves if it cannot be opened.
    async fn open_own(&self, slot: Slot) -> Result<HotConnection, sqlx::Error> {
        // Boxed, as is the pool's acquire below: both are rare here, and
        // inline their state machines made every statement's future (moved
        // into its deadline, then into the request's task) several
        // kilobytes larger: ≈70,000 instructions of `memcpy` per statement.
        let opening = tokio::time::timeout(
            self.shared.connect_timeout,
            Box::pin(open(&self.shared.options)),
        )
        .await;
        match opening {
            Ok(Ok(conn)) => {
                return Ok(self.lend(Own {
                    conn,
                    slot,
                    opened: Instant::now(),
                    max_idle: self.shared.max_idle,
                    spare_after: self.shared.spare_after,
                    wanted: self.shared.wanted.clone(),
                }));
            }
            // Postgres out of connections, or slow to open one: the
            // pool's open connections can still serve. The slot goes
            // back as it is dropped.
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "per-thread connection not opened; using the pool")
            }
            Err(_) => tracing::debug!("per-thread connection timed out; using the pool"),
        }
        self.pooled().await
    }

    /// One of this thread's connections as it is given back, if this
    /// thread has more out than statements already waiting for one, and
    /// one comes back within the wait.
    async fn wait_for_own(&self) -> Option<Own> {
        let lent = self.lent_here().load(Ordering::Relaxed);
        if lent == 0 {
            // Every place is another thread's: nothing comes back here.
            return None;
        }
        let (handoff, received) = oneshot::channel();
        let queued = WAITING.with(|waiting| {
            let home = Arc::as_ptr(&self.shared);
            let mut waiting = waiting.borrow_mut();
            // Waits that ended unserved (past their time, or cancelled).
            waiting.retain(|w| !w.handoff.is_closed());
            let ahead = waiting
                .iter()
                .filter(|w| std::ptr::eq(w.home, home))
                .count();
            let queued = ahead < lent;
            if queued {
                waiting.push_back(Waiter { home, handoff });
            }
            queued
        });
        if !queued {
            return None;
        }
        let mut waiting = Waiting(received);
        tokio::time::timeout(self.shared.wait_for_own, &mut waiting.0)
            .await
            .ok()?
            .ok()
    }

    /// This thread's count of connections out, of this database.
    fn lent_here(&self) -> Arc<AtomicUsize> {
        let home = Arc::as_ptr(&self.shared);
        LENT.with(|lent| {
            let mut lent = lent.borrow_mut();
            if let Some(entry) = lent.iter().find(|l| std::ptr::eq(l.home.as_ptr(), home)) {
                return entry.count.clone();
            }
            // Its application is gone: nothing counts there any more.
            lent.retain(|l| l.home.strong_count() > 0);
            let count = Arc::new(AtomicUsize::new(0));
            lent.push(Lent {
                home: Arc::downgrade(&self.shared),
                count: count.clone(),
            });
            count
        })
    }

    /// Lends `own` to a statement of this thread, counted until it is
    /// given back or closed.
    fn lend(&self, own: Own) -> HotConnection {
        let lent = self.lent_here();
        lent.fetch_add(1, Ordering::Relaxed);
        HotConnection {
            held: Some(Held::Own(own)),
            lent: Some(lent),
            reusable: false,
        }
    }

    async fn pooled(&self) -> Result<HotConnection, sqlx::Error> {
        Ok(HotConnection {
            held: Some(Held::Pooled(Box::pin(self.pool.acquire()).await?)),
            lent: None,
            reusable: false,
        })
    }

    /// How many statements the pool has served because every per-thread
    /// place was taken, since start.
    pub fn overflowed(&self) -> u64 {
        self.shared.overflowed.load(Ordering::Relaxed)
    }

    /// An idle connection of this thread to this database. Every call also
    /// closes this thread's idle connections that have waited too long, of
    /// any database, so their places go back to the threads that need them.
    fn take_idle(&self) -> Option<Own> {
        let now = Instant::now();
        // Compared by address: no reference count is written on this path.
        let home = Arc::as_ptr(&self.shared);
        let mut stale = Vec::new();
        let found = IDLE.with(|idle| {
            let mut idle = idle.borrow_mut();
            let mut i = 0;
            while i < idle.len() {
                let entry = &idle[i];
                if entry.own.slot.0.strong_count() == 0 {
                    // Its application is gone: nothing can use it.
                    drop(idle.swap_remove(i));
                    continue;
                }
                if now.duration_since(entry.since) >= entry.own.max_idle
                    || now.duration_since(entry.own.opened) >= MAX_LIFETIME
                {
                    stale.push(idle.swap_remove(i).own);
                    continue;
                }
                i += 1;
            }
            idle.iter()
                .rposition(|i| std::ptr::eq(Weak::as_ptr(&i.own.slot.0), home))
                .map(|position| idle.swap_remove(position).own)
        });
        for own in stale {
            close_in_background(own);
        }
        found
    }
}

/// A new connection, its backend set up as the pool's are
/// ([`super::backend_memory`]).
async fn open(options: &PgConnectOptions) -> Result<PgConnection, sqlx::Error> {
    let mut conn = options.connect().await?;
    super::backend_memory::keep_freed_memory(&mut conn).await?;
    Ok(conn)
}

/// A connection on loan for one statement; derefs to [`PgConnection`].
pub struct HotConnection {
    held: Option<Held>,
    /// The count of the lending thread's connections out, for an own one.
    lent: Option<Arc<AtomicUsize>>,
    reusable: bool,
}

enum Held {
    Own(Own),
    /// Over the limit: an ordinary pooled connection.
    Pooled(PoolConnection<Postgres>),
}

impl HotConnection {
    /// Ends the loan after the statement's future completed: on success the
    /// connection waits for this thread's next request.
    pub fn finish<T, E>(mut self, result: &Result<T, E>) {
        self.reusable = result.is_ok();
    }
}

impl Deref for HotConnection {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self.held.as_ref() {
            Some(Held::Own(own)) => &own.conn,
            Some(Held::Pooled(conn)) => conn,
            None => unreachable!("a connection is held until drop"),
        }
    }
}

impl DerefMut for HotConnection {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self.held.as_mut() {
            Some(Held::Own(own)) => &mut own.conn,
            Some(Held::Pooled(conn)) => conn,
            None => unreachable!("a connection is held until drop"),
        }
    }
}

impl Drop for HotConnection {
    fn drop(&mut self) {
        if let Some(lent) = self.lent.take() {
            lent.fetch_sub(1, Ordering::Relaxed);
        }
        match self.held.take() {
            Some(Held::Own(own)) if self.reusable => give_back(own),
            // Possibly mid-statement: never reused, and not closed politely
            // either (a goodbye would wait behind the statement). Dropping
            // the socket ends the session as soon as Postgres next reads.
            Some(Held::Own(own)) => drop(own),
            // The pool checks and takes back its own.
            Some(Held::Pooled(_)) | None => {}
        }
    }
}

/// Takes back a connection whose statement succeeded: for the oldest
/// statement of this thread waiting for one, or else for this thread's
/// next request.
fn give_back(own: Own) {
    let Some(own) = hand_to_waiter(own) else {
        return;
    };
    let now = Instant::now();
    let spare = IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        let mut spare = None;
        if own.wanted.load(Ordering::Relaxed) && may_give_back(now) {
            let home = Weak::as_ptr(&own.slot.0);
            spare = idle.iter().position(|i| {
                std::ptr::eq(Weak::as_ptr(&i.own.slot.0), home)
                    && now.duration_since(i.since) >= i.own.spare_after
            });
        }
        let spare = spare.map(|position| {
            // More than this thread needs: its place goes to the thread
            // that found none.
            own.wanted.store(false, Ordering::Relaxed);
            GAVE_BACK.set(Some(now));
            idle.swap_remove(position).own
        });
        idle.push(Idle { own, since: now });
        spare
    });
    if let Some(own) = spare {
        close_in_background(own);
    }
}

/// Gives `own` to the oldest statement of this thread waiting for a
/// connection of its database; back if none is waiting any more.
fn hand_to_waiter(mut own: Own) -> Option<Own> {
    let home = Weak::as_ptr(&own.slot.0);
    loop {
        let waiter = WAITING.with(|waiting| {
            let mut waiting = waiting.borrow_mut();
            let position = waiting.iter().position(|w| std::ptr::eq(w.home, home))?;
            waiting.remove(position)
        });
        let Some(waiter) = waiter else {
            return Some(own);
        };
        match waiter.handoff.send(own) {
            Ok(()) => return None,
            // Its wait ended meanwhile: the next one, or the idle list.
            Err(back) => own = back,
        }
    }
}

/// Whether this thread may give a place back at `now` ([`GIVE_BACK_EVERY`]).
fn may_give_back(now: Instant) -> bool {
    GAVE_BACK
        .get()
        .is_none_or(|last| now.duration_since(last) >= GIVE_BACK_EVERY)
}

/// Says goodbye to Postgres properly when a runtime is at hand (so its log
/// shows no broken connection); otherwise just drops the socket. Only for
/// idle connections: nothing is in flight on them. The place is given back
/// at once: a goodbye takes no capacity.
fn close_in_background(own: Own) {
    let Own { conn, slot, .. } = own;
    drop(slot);
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), conn.close()).await;
        });
    }
}
