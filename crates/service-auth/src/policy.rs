//! The built-in [`Authorizer`]: a permission required per action, then owner scoping,
//! which gives every principal its own threads, runs, crons, assistants and store.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use serde_json::Value;
use service_engine::auth::{Action, AuthRequest, Authorizer, Decision, Principal, Resource};
use service_types::Metadata;

use crate::AuthConfigError;
use crate::config::Scoping;

/// The metadata key owner scoping stamps with the principal's identity.
pub const OWNER_KEY: &str = "owner";

/// Permissions per action, then (with [`Scoping::Owner`]) owner scoping: what a
/// principal makes carries `metadata.owner` = its identity and only it sees it; the
/// system assistants are readable by all; its store namespaces are put under one
/// label, its identity.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    scoping: Scoping,
    permissions: HashMap<(Resource, Action), String>,
}

const RESOURCES: [Resource; 4] = [
    Resource::Threads,
    Resource::Assistants,
    Resource::Crons,
    Resource::Store,
];
const ACTIONS: [Action; 6] = [
    Action::Create,
    Action::Read,
    Action::Update,
    Action::Delete,
    Action::Search,
    Action::CreateRun,
];

/// Every `resource:action` a permission may be required for.
fn actions() -> BTreeMap<String, (Resource, Action)> {
    RESOURCES
        .iter()
        .flat_map(|resource| {
            ACTIONS
                .iter()
                .filter(move |action| {
                    **action != Action::CreateRun || *resource == Resource::Threads
                })
                .map(move |action| {
                    (
                        format!("{}:{}", resource.name(), action.name()),
                        (*resource, *action),
                    )
                })
        })
        .collect()
}

impl Policy {
    /// No permission required, scoping as given.
    pub fn new(scoping: Scoping) -> Self {
        Self {
            scoping,
            permissions: HashMap::new(),
        }
    }

    /// Requires `permission` for `action` on `resource` (else 403 naming it).
    pub fn require(mut self, resource: Resource, action: Action, permission: &str) -> Self {
        self.permissions
            .insert((resource, action), permission.to_owned());
        self
    }

    /// The policy of `auth.scoping` and `auth.permissions`: an unknown action or an
    /// empty permission is an error naming it.
    pub fn from_config(
        scoping: Scoping,
        permissions: &BTreeMap<String, String>,
    ) -> Result<Self, AuthConfigError> {
        let known = actions();
        let mut policy = Self::new(scoping);
        for (action, permission) in permissions {
            let Some((resource, verb)) = known.get(action) else {
                let names: Vec<&str> = known.keys().map(String::as_str).collect();
                return Err(AuthConfigError(format!(
                    "auth.permissions: unknown action {action:?}; the actions are {}",
                    names.join(", ")
                )));
            };
            if permission.is_empty() {
                return Err(AuthConfigError(format!(
                    "auth.permissions.{action}: the permission is empty"
                )));
            }
            policy = policy.require(*resource, *verb, permission);
        }
        Ok(policy)
    }

    /// True when the policy neither scopes nor requires anything: no authorizer is
    /// needed then.
    pub fn is_open(&self) -> bool {
        self.scoping == Scoping::None && self.permissions.is_empty()
    }
}

fn owner(identity: &str) -> Metadata {
    let mut owner = Metadata::new();
    owner.insert(OWNER_KEY.into(), Value::String(identity.to_owned()));
    owner
}

#[async_trait]
impl Authorizer for Policy {
    async fn authorize(&self, principal: &Principal, request: AuthRequest<'_>) -> Decision {
        if let Some(required) = self.permissions.get(&(request.resource, request.action))
            && !principal.has_permission(required)
        {
            return Decision::Deny(format!(
                "The permission '{required}' is required for {request}"
            ));
        }
        if self.scoping == Scoping::None {
            return Decision::Allow;
        }
        match (request.resource, request.action) {
            // The identity as the one label: the engine makes any text a safe label.
            (Resource::Store, _) => Decision::Namespace(vec![principal.identity.clone()]),
            (Resource::Assistants, Action::Read | Action::Search) => {
                let mut system = Metadata::new();
                system.insert("created_by".into(), Value::String("system".into()));
                Decision::FilterAny(vec![owner(&principal.identity), system])
            }
            _ => Decision::Filter(owner(&principal.identity)),
        }
    }

    fn reads_values(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    async fn ask(
        policy: &Policy,
        principal: &Principal,
        resource: Resource,
        action: Action,
    ) -> Decision {
        let value = Value::Null;
        policy
            .authorize(
                principal,
                AuthRequest {
                    resource,
                    action,
                    value: &value,
                },
            )
            .await
    }

    #[tokio::test]
    async fn owner_scoping_uses_the_identity_as_owner_and_as_the_store_label() {
        let policy = Policy::new(Scoping::Owner);
        let alice = Principal::new("jwt:alice.smith@example.com");
        assert_eq!(
            ask(&policy, &alice, Resource::Threads, Action::Create).await,
            Decision::Filter(owner("jwt:alice.smith@example.com"))
        );
        assert_eq!(
            ask(&policy, &alice, Resource::Store, Action::Read).await,
            Decision::Namespace(vec!["jwt:alice.smith@example.com".into()])
        );
        let Decision::FilterAny(alternatives) =
            ask(&policy, &alice, Resource::Assistants, Action::Search).await
        else {
            panic!("assistants are read among the system ones");
        };
        assert_eq!(alternatives[1].get("created_by"), Some(&json!("system")));
    }

    #[tokio::test]
    async fn a_missing_permission_is_denied_naming_it() {
        let policy = Policy::from_config(
            Scoping::None,
            &BTreeMap::from([("threads:create_run".to_owned(), "run".to_owned())]),
        )
        .expect("a policy");
        let reader = Principal::new("key:reader");
        let Decision::Deny(message) =
            ask(&policy, &reader, Resource::Threads, Action::CreateRun).await
        else {
            panic!("denied");
        };
        assert!(message.contains("'run'"), "{message}");
        let runner = Principal {
            permissions: vec!["run".into()],
            ..Principal::new("key:runner")
        };
        assert_eq!(
            ask(&policy, &runner, Resource::Threads, Action::CreateRun).await,
            Decision::Allow
        );
    }

    #[test]
    fn unknown_actions_are_refused_listing_the_known_ones() {
        let refused = Policy::from_config(
            Scoping::None,
            &BTreeMap::from([("store:create_run".to_owned(), "x".to_owned())]),
        );
        assert!(
            matches!(refused, Err(AuthConfigError(m)) if m.contains("unknown action") && m.contains("threads:create_run"))
        );
    }
}
