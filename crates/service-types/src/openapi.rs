//! OpenAPI schemas of the types whose serde is written by hand (every other wire type
//! derives `utoipa::ToSchema` beside its serde derives).

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    ArrayBuilder, KnownFormat, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, Type,
};

use crate::{ExcludeMetadata, NodeSelection, ProtocolCommand, Timestamp};

/// In the OpenAPI document: a `date-time` string.
impl utoipa::PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

/// In the OpenAPI document: `"*"` or a list of node names.
impl utoipa::PartialSchema for NodeSelection {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["*"])),
            )
            .item(ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String)))
            .into()
    }
}

impl utoipa::ToSchema for NodeSelection {}

/// In the OpenAPI document: one object or a list of them.
impl utoipa::PartialSchema for ExcludeMetadata {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Object))
            .item(ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::Object)))
            .into()
    }
}

impl utoipa::ToSchema for ExcludeMetadata {}

/// In the OpenAPI document: the envelope `from_value` reads.
impl utoipa::PartialSchema for ProtocolCommand {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .property("id", ObjectBuilder::new().schema_type(Type::Integer))
            .required("id")
            .property("method", ObjectBuilder::new().schema_type(Type::String))
            .required("method")
            .property("params", ObjectBuilder::new().schema_type(Type::Object))
            .description(Some(
                "A protocol v2 command: `run.start`, `input.respond`, …",
            ))
            .into()
    }
}

impl utoipa::ToSchema for ProtocolCommand {}
