//! A tool's `outputSchema`, generated from its Rust result type as the
//! input schemas are, for what the type serializes.

/// The JSON Schema of what `T` serializes, as a tool's output schema.
pub(crate) fn output_schema_for<T: schemars::JsonSchema>() -> std::sync::Arc<rmcp::model::JsonObject>
{
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    absent_not_null(&mut schema);
    if let Some(root) = schema.as_object_mut() {
        // The Rust type's name and doc are no use to a model.
        root.remove("title");
        root.remove("description");
    }
    match schema {
        serde_json::Value::Object(object) => std::sync::Arc::new(object),
        // A struct's schema is always an object; an empty schema accepts anything.
        _ => std::sync::Arc::default(),
    }
}

/// Our result types skip an optional field rather than write `null`, and
/// what a type serializes leaves exactly those out of `required`: describe
/// them as what they are when present, without `null`, so that a model does
/// not expect one.
fn absent_not_null(schema: &mut serde_json::Value) {
    use serde_json::Value;
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let required: Vec<Value> = match object.get("required") {
        Some(Value::Array(r)) => r.clone(),
        _ => Vec::new(),
    };
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(&Value::String(name.clone())) {
                strip_null(property);
            }
        }
    }
    for value in object.values_mut() {
        match value {
            Value::Object(_) => absent_not_null(value),
            Value::Array(items) => items.iter_mut().for_each(absent_not_null),
            _ => {}
        }
    }
}

fn strip_null(property: &mut serde_json::Value) {
    use serde_json::Value;
    let null = serde_json::json!({ "type": "null" });
    let Some(object) = property.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(any)) = object.get_mut("anyOf") {
        any.retain(|s| *s != null);
        if let [Value::Object(only)] = any.as_slice() {
            let only = only.clone();
            object.remove("anyOf");
            for (k, v) in only {
                object.entry(k).or_insert(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_schemas_leave_skipped_fields_out_instead_of_allowing_null() {
        let mut schema = serde_json::json!({
            "type": "object",
            "required": ["kept"],
            "properties": {
                "kept": {"type": ["string", "null"]},
                "skipped": {"type": ["string", "null"], "description": "d"},
                "nested": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}], "description": "n"},
            },
        });
        absent_not_null(&mut schema);
        assert_eq!(
            schema["properties"]["kept"]["type"],
            serde_json::json!(["string", "null"])
        );
        assert_eq!(
            schema["properties"]["skipped"],
            serde_json::json!({"type": "string", "description": "d"})
        );
        assert_eq!(
            schema["properties"]["nested"],
            serde_json::json!({"$ref": "#/$defs/X", "description": "n"})
        );
    }
}
