//! Authorization: who a request comes from (`Principal`), what it asks to do
//! (`Resource`, `Action`), and the `Authorizer` that answers allow, deny, or a scope
//! that narrows what it may touch. Authentication itself (credentials to principal)
//! is the HTTP adapter's; this is what the adapter and the engine agree on.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use service_store::containment::Enforced;
use service_types::Metadata;

use crate::{EngineError, EngineResult, ErrorKind};

/// The authenticated caller.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Principal {
    /// Stable identity (a user id, a key's name, a token's subject).
    pub identity: String,
    /// Permissions granted, checked by authorizers (`threads:create`, ...).
    pub permissions: Vec<String>,
    /// A name to show, when known.
    pub display_name: Option<String>,
    /// Anything else the authenticator learned (a token's claims, say).
    pub extra: Metadata,
}

impl Principal {
    /// A principal with this identity and no permissions.
    pub fn new(identity: impl Into<String>) -> Self {
        Self {
            identity: identity.into(),
            ..Self::default()
        }
    }

    /// True when the principal holds `permission`.
    pub fn has_permission(&self, permission: &str) -> bool {
        self.permissions.iter().any(|held| held == permission)
    }
}

/// A resource group, as authorization handlers are registered (SPEC "Authentication"
/// 3): threads cover the run routes and the deliveries routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    /// Threads, their state and history, and their runs.
    Threads,
    /// Assistants and their versions, graphs and schemas.
    Assistants,
    /// Crons.
    Crons,
    /// The long-term key/value store.
    Store,
}

impl Resource {
    /// The name used in permission strings (`threads`, `assistants`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Threads => "threads",
            Self::Assistants => "assistants",
            Self::Crons => "crons",
            Self::Store => "store",
        }
    }
}

/// What a request does to its resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Makes one.
    Create,
    /// Reads one (or joins its streams).
    Read,
    /// Changes one.
    Update,
    /// Deletes one.
    Delete,
    /// Lists or counts.
    Search,
    /// Starts a run (threads only; stateless runs included).
    CreateRun,
}

impl Action {
    /// The name used in permission strings (`create`, `create_run`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Read => "read",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Search => "search",
            Self::CreateRun => "create_run",
        }
    }
}

/// One authorization question.
#[derive(Clone, Copy, Debug)]
pub struct AuthRequest<'a> {
    /// The resource group.
    pub resource: Resource,
    /// The action.
    pub action: Action,
    /// The request as JSON: `{"path": {..path parameters}, "query": {..}, "body": ..}`.
    pub value: &'a Value,
}

impl fmt::Display for AuthRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.resource.name(), self.action.name())
    }
}

/// An authorizer's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// The request goes ahead unrestricted.
    Allow,
    /// 403, with this message.
    Deny(String),
    /// Only resources whose metadata contains this subset (SPEC's
    /// `enforcedMetadata`): stamped onto what the request creates or updates, ANDed
    /// into every read and search. A resource outside it answers 404.
    Filter(Metadata),
    /// Like [`Filter`](Self::Filter), matching any of several subsets (for reads
    /// that may also see shared resources); creates are stamped with the first. No
    /// subset matches nothing.
    FilterAny(Vec<Metadata>),
    /// Store only: the request's namespaces are moved under this prefix, and answers
    /// have it taken off again, so each tenant sees a store of its own.
    Namespace(Vec<String>),
}

/// Decides, per resource and action, what a principal may do. Called once per
/// request, before the route does any work.
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// The decision for `principal` asking `request`.
    async fn authorize(&self, principal: &Principal, request: AuthRequest<'_>) -> Decision;

    /// Whether decisions look at [`AuthRequest::value`]. One that decides on the
    /// principal, resource and action alone answers `false`, and requests are then
    /// not buffered and parsed for it (`value` is null).
    fn reads_values(&self) -> bool {
        true
    }
}

/// What an authorized request may touch, as the routes and the engine apply it.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Scope {
    /// Everything.
    #[default]
    All,
    /// Resources whose metadata contains one of the alternatives; what the request
    /// makes is stamped with the first.
    Owned(Enforced),
    /// Store items under this namespace prefix.
    Namespace(Vec<String>),
}

impl Scope {
    /// The scope a decision grants; a denial's message otherwise.
    pub fn from_decision(decision: Decision) -> Result<Self, String> {
        match decision {
            Decision::Allow => Ok(Self::All),
            Decision::Deny(message) => Err(message),
            Decision::Filter(metadata) => Ok(Self::Owned(Enforced::metadata(metadata))),
            Decision::FilterAny(alternatives) => Ok(Self::Owned(Enforced(alternatives))),
            Decision::Namespace(prefix) => Ok(Self::Namespace(prefix)),
        }
    }

    /// The ownership filter pushed into searches and counts.
    pub fn enforced(&self) -> Option<Enforced> {
        match self {
            Self::Owned(enforced) => Some(enforced.clone()),
            Self::All | Self::Namespace(_) => None,
        }
    }

    /// True when a resource with `metadata` is within the scope.
    pub fn admits(&self, metadata: &Metadata) -> bool {
        match self {
            Self::Owned(enforced) => enforced.admits(metadata),
            Self::All | Self::Namespace(_) => true,
        }
    }

    /// Writes the scope's stamp into `metadata`, over the request's own keys, so a
    /// resource cannot be made or patched out of its owner's reach.
    pub fn stamp(&self, metadata: &mut Metadata) {
        if let Self::Owned(Enforced(alternatives)) = self
            && let Some(stamp) = alternatives.first()
        {
            metadata.extend(stamp.clone());
        }
    }

    /// [`stamp`](Self::stamp) on optional metadata, creating it when there is a stamp.
    pub fn stamp_option(&self, metadata: &mut Option<Metadata>) {
        if matches!(self, Self::Owned(_)) {
            self.stamp(metadata.get_or_insert_with(Metadata::new));
        }
    }
}

/// The scope `decision` grants for `request`: a denial is a 403; a namespace for
/// anything but the store, or a metadata filter for the store, is the authorizer's
/// mistake and fails closed (500, logged) rather than be read as "everything".
pub fn decide(
    principal: &Principal,
    request: AuthRequest<'_>,
    decision: Decision,
) -> EngineResult<Scope> {
    let is_store = request.resource == Resource::Store;
    match Scope::from_decision(decision) {
        Err(message) => {
            tracing::info!(identity = %principal.identity, %request, "denied");
            Err(EngineError::new(ErrorKind::Forbidden, message))
        }
        Ok(Scope::Namespace(_)) if !is_store => Err(misanswered(request)),
        Ok(Scope::Owned(_)) if is_store => Err(misanswered(request)),
        Ok(scope) => Ok(scope),
    }
}

fn misanswered(request: AuthRequest<'_>) -> EngineError {
    EngineError::internal(std::io::Error::other(format!(
        "the authorizer answered {request} with a scope that resource cannot take"
    )))
}

/// Who calls the engine: the principal, the scope its request was granted, and the
/// authorizer, which the engine asks again when a request touches a second resource
/// (a run's assistant, a cron's). Every verb on tenant data is reached through one
/// ([`Engine::as_caller`](crate::Engine::as_caller)).
#[derive(Clone)]
pub struct Caller {
    principal: Arc<Principal>,
    authorizer: Option<Arc<dyn Authorizer>>,
    scope: Scope,
}

impl fmt::Debug for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Caller")
            .field("identity", &self.principal.identity)
            .field("scope", &self.scope)
            .field("authorizer", &self.authorizer.is_some())
            .finish()
    }
}

impl Caller {
    /// A caller granted `scope` by `authorizer` (none: nothing further is asked).
    pub fn new(
        principal: Arc<Principal>,
        authorizer: Option<Arc<dyn Authorizer>>,
        scope: Scope,
    ) -> Self {
        Self {
            principal,
            authorizer,
            scope,
        }
    }

    /// A caller that may touch everything: the server's own work (crons firing,
    /// sweepers, recovery) and embedders without authorization.
    pub fn system() -> Self {
        Self::new(Arc::new(Principal::new("system")), None, Scope::All)
    }

    /// Who is calling.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// What the request was granted.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The scope the caller has for `action` on `resource` with these path parameters,
    /// as that resource's route would ask: everything without an authorizer.
    pub async fn ask(
        &self,
        resource: Resource,
        action: Action,
        path: Value,
    ) -> EngineResult<Scope> {
        let Some(authorizer) = &self.authorizer else {
            return Ok(Scope::All);
        };
        let value = serde_json::json!({"path": path, "query": {}, "body": null});
        let request = AuthRequest {
            resource,
            action,
            value: &value,
        };
        let decision = authorizer.authorize(&self.principal, request).await;
        decide(&self.principal, request, decision)
    }

    /// The same principal granted the scope of another question: a command on a read
    /// route (a WebSocket) that starts a run acts as a run creation.
    pub async fn acting_as(
        &self,
        resource: Resource,
        action: Action,
        path: Value,
    ) -> EngineResult<Self> {
        let scope = self.ask(resource, action, path).await?;
        Ok(Self {
            scope,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Metadata {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_filter_stamps_over_the_request_and_admits_only_its_owner() {
        let scope = Scope::from_decision(Decision::Filter(object(json!({"owner": "a"}))));
        let scope = scope.unwrap_or_default();
        let mut metadata = object(json!({"owner": "b", "k": 1}));
        scope.stamp(&mut metadata);
        assert_eq!(metadata, object(json!({"owner": "a", "k": 1})));
        assert!(scope.admits(&metadata));
        assert!(!scope.admits(&object(json!({"owner": "b"}))));
    }

    #[test]
    fn a_denial_has_no_scope_and_allow_admits_everything() {
        assert_eq!(
            Scope::from_decision(Decision::Deny("no".into())),
            Err("no".to_owned())
        );
        let all = Scope::from_decision(Decision::Allow).unwrap_or_default();
        assert!(all.admits(&Metadata::new()));
        let mut untouched = None;
        all.stamp_option(&mut untouched);
        assert_eq!(untouched, None);
    }
}
