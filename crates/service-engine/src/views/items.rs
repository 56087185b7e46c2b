//! The long-term store as a caller sees it.

use service_types::{Item, SearchItem, StoreListNamespaces, StorePut, StoreSearch};

use super::View;
use crate::auth::Scope;
use crate::namespaces::{Tenant, refuse_reserved_root};
use crate::{EngineError, EngineResult};

/// Store items. A caller whose scope is a namespace (a tenant) has a store of its own:
/// its namespaces live under the reserved root and its escaped tenant labels, which it
/// never sees; every other caller (and every graph) is refused that root.
#[derive(Clone, Copy, Debug)]
pub struct Items<'a>(View<'a>);

impl<'a> Items<'a> {
    pub(super) fn new(view: View<'a>) -> Self {
        Self(view)
    }

    fn tenant(self) -> Option<Tenant> {
        match self.0.caller.scope() {
            Scope::Namespace(labels) => Some(Tenant::new(labels)),
            Scope::All | Scope::Owned(_) => None,
        }
    }

    /// Stores an item.
    pub async fn put(self, mut body: StorePut) -> EngineResult<()> {
        crate::validate_namespace(&body.namespace)?;
        body.namespace = stored(self.tenant().as_ref(), body.namespace)?;
        self.0.engine.inner.items.put(body).await
    }

    /// Reads an item (`refresh`: extend its expiry).
    pub async fn get(
        self,
        namespace: Vec<String>,
        key: &str,
        refresh: Option<bool>,
    ) -> EngineResult<Option<Item>> {
        let tenant = self.tenant();
        let namespace = stored(tenant.as_ref(), namespace)?;
        let item = self
            .0
            .engine
            .inner
            .items
            .get(&namespace, key, refresh)
            .await?;
        Ok(item.map(|mut item| {
            if let Some(tenant) = &tenant {
                item.namespace = tenant.outside(item.namespace);
            }
            item
        }))
    }

    /// Deletes an item (absent is fine).
    pub async fn delete(self, namespace: Vec<String>, key: &str) -> EngineResult<()> {
        let namespace = stored(self.tenant().as_ref(), namespace)?;
        self.0.engine.inner.items.delete(&namespace, key).await
    }

    /// Filtered search under a namespace prefix.
    pub async fn search(self, mut body: StoreSearch) -> EngineResult<Vec<SearchItem>> {
        let tenant = self.tenant();
        body.namespace_prefix = stored(tenant.as_ref(), body.namespace_prefix)?;
        let mut found = self.0.engine.inner.items.search(body).await?;
        if let Some(tenant) = &tenant {
            for item in &mut found {
                item.item.namespace = tenant.outside(std::mem::take(&mut item.item.namespace));
            }
        }
        Ok(found)
    }

    /// Lists namespaces.
    pub async fn namespaces(self, mut body: StoreListNamespaces) -> EngineResult<Vec<Vec<String>>> {
        if let Some(prefix) = &body.prefix {
            refuse_reserved_root(prefix)?;
        }
        if body.max_depth.is_some_and(|depth| depth < 1) {
            return Err(EngineError::unprocessable("max_depth must be at least 1"));
        }
        let Some(tenant) = self.tenant() else {
            return self.0.engine.inner.items.list_namespaces(body).await;
        };
        body.prefix = Some(tenant.inside(body.prefix.take().unwrap_or_default()));
        body.max_depth = body
            .max_depth
            .map(|depth| depth.saturating_add(tenant.depth() as i64));
        let namespaces = self.0.engine.inner.items.list_namespaces(body).await?;
        Ok(namespaces
            .into_iter()
            .map(|namespace| tenant.outside(namespace))
            .collect())
    }
}

/// The caller's namespace as stored: under the tenant's place, when it has one.
fn stored(tenant: Option<&Tenant>, namespace: Vec<String>) -> EngineResult<Vec<String>> {
    refuse_reserved_root(&namespace)?;
    Ok(match tenant {
        Some(tenant) => tenant.inside(namespace),
        None => namespace,
    })
}
