//! The engine's public face: one view per resource, each reached through the
//! [`Caller`] asking ([`Engine::as_caller`]). A view decides scope once, in one
//! function per resource (`crate::within`): a resource outside the caller's scope
//! answers as unknown, searches are narrowed in the store's query, what is made is
//! stamped, and a request naming a second resource (a run's assistant, a run on a
//! thread) checks that one too. The server's own work (crons firing, sweepers,
//! recovery) goes through [`System`], the only unscoped door.

mod assistants;
mod crons;
mod deliveries;
mod items;
mod protocol;
mod runs;
mod threads;

use std::sync::LazyLock;

pub use assistants::Assistants;
pub use crons::Crons;
pub use deliveries::Deliveries;
pub use items::Items;
pub use protocol::Protocol;
pub use runs::{Runs, Watched};
pub use threads::Threads;

use crate::Engine;
use crate::auth::Caller;

/// The engine as one caller sees it.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    engine: &'a Engine,
    caller: &'a Caller,
}

impl<'a> View<'a> {
    /// Not found unless the thread exists within the caller's scope: the check of
    /// every view that reaches something through a thread.
    async fn thread(self, thread_id: uuid::Uuid) -> crate::EngineResult<()> {
        self.engine
            .thread_within(thread_id, self.caller.scope())
            .await
    }

    /// Threads, their state, history and thread streams.
    pub fn threads(self) -> Threads<'a> {
        Threads::new(self)
    }

    /// Runs: creation, reads, cancels, joins.
    pub fn runs(self) -> Runs<'a> {
        Runs::new(self)
    }

    /// Assistants, their versions and graphs.
    pub fn assistants(self) -> Assistants<'a> {
        Assistants::new(self)
    }

    /// Crons.
    pub fn crons(self) -> Crons<'a> {
        Crons::new(self)
    }

    /// The long-term key/value store's items.
    pub fn items(self) -> Items<'a> {
        Items::new(self)
    }

    /// Webhook deliveries of runs.
    pub fn deliveries(self) -> Deliveries<'a> {
        Deliveries::new(self)
    }

    /// Protocol v2's thread commands and event streams.
    pub fn protocol(self) -> Protocol<'a> {
        Protocol::new(self)
    }
}

static SYSTEM: LazyLock<Caller> = LazyLock::new(Caller::system);

/// The server's own, unscoped access: crons firing, sweepers, recovery, boot.
#[derive(Clone, Copy, Debug)]
pub struct System<'a> {
    engine: &'a Engine,
}

impl<'a> System<'a> {
    /// Every resource, unscoped.
    pub fn view(self) -> View<'a> {
        View {
            engine: self.engine,
            caller: &SYSTEM,
        }
    }

    /// The store itself, unscoped (tests and trusted embedder code that inspect it).
    pub fn store(self) -> &'a service_store::Store {
        self.engine.store()
    }

    /// Creates (once) the system assistant of every registered graph.
    pub async fn ensure_system_assistants(self) -> crate::EngineResult<()> {
        self.engine.ensure_system_assistants().await
    }

    /// Starts one run per due cron occurrence.
    pub async fn fire_due_crons(self) {
        self.engine.fire_due_crons().await;
    }

    /// One sweeper pass (expired threads, items, idempotency records).
    pub async fn sweep_once(self) {
        self.engine.sweep_once().await;
    }

    /// Settles, as errors, running runs whose executor is gone. Returns how many.
    pub async fn recover_orphaned_runs(self) -> usize {
        self.engine.recover_orphaned_runs().await
    }
}

impl Engine {
    /// The engine as `caller` may see it.
    pub fn as_caller<'a>(&'a self, caller: &'a Caller) -> View<'a> {
        View {
            engine: self,
            caller,
        }
    }

    /// The unscoped door, for the server's own work and trusted embedder code.
    pub fn system(&self) -> System<'_> {
        System { engine: self }
    }
}
