//! "Not in scope is not found", once per resource: a resource outside the caller's
//! [`Scope`] answers as unknown (404, never 403, so ids of other tenants do not leak).
//! Unrestricted scopes read nothing. Searches are narrowed in the store's query
//! instead (`Scope::enforced`). Only the views (`crate::views`) call these.

use serde_json::json;
use service_types::Assistant;
use uuid::Uuid;

use crate::auth::{Action, Caller, Resource, Scope};
use crate::threads::thread_not_found;
use crate::{Engine, EngineError, EngineResult};

impl Engine {
    /// Not found unless the thread exists within `scope`.
    pub(crate) async fn thread_within(&self, thread_id: Uuid, scope: &Scope) -> EngineResult<()> {
        if *scope == Scope::All {
            return Ok(());
        }
        let thread = self.get_thread(thread_id).await?;
        if scope.admits(&thread.metadata) {
            Ok(())
        } else {
            Err(thread_not_found(thread_id))
        }
    }

    /// Not found unless the assistant (a UUID or a graph id) exists within `scope`.
    pub(crate) async fn assistant_within(&self, id: &str, scope: &Scope) -> EngineResult<()> {
        if *scope == Scope::All {
            return Ok(());
        }
        let assistant = self.get_assistant(id).await?;
        if scope.admits(&assistant.metadata) {
            Ok(())
        } else {
            Err(EngineError::not_found("Not Found"))
        }
    }

    /// Not found unless the cron exists within `scope`.
    pub(crate) async fn cron_within(&self, cron_id: Uuid, scope: &Scope) -> EngineResult<()> {
        if *scope == Scope::All {
            return Ok(());
        }
        let cron = self.get_cron(cron_id).await?;
        if scope.admits(&cron.metadata) {
            Ok(())
        } else {
            Err(EngineError::not_found("Not Found"))
        }
    }

    /// Not found unless the run exists within `scope` (its own metadata carries the
    /// stamp, so a stateless run is checked after its thread is gone).
    pub(crate) async fn run_within(&self, run_id: Uuid, scope: &Scope) -> EngineResult<()> {
        if *scope == Scope::All {
            return Ok(());
        }
        let run = self.get_run(None, run_id).await?;
        if scope.admits(&run.metadata) {
            Ok(())
        } else {
            Err(EngineError::not_found("Not Found"))
        }
    }

    /// The assistant a run (or a cron's runs) would be built from, when `caller` may
    /// read it: every path that starts a run asks this, whatever its own resource.
    pub(crate) async fn runnable_assistant(
        &self,
        caller: &Caller,
        id: &str,
    ) -> EngineResult<Assistant> {
        let assistant = self.resolve_run_assistant(id).await?;
        let path = json!({ "assistant_id": id });
        let scope = caller.ask(Resource::Assistants, Action::Read, path).await?;
        if scope.admits(&assistant.metadata) {
            Ok(assistant)
        } else {
            Err(EngineError::not_found("Thread or assistant not found."))
        }
    }
}
