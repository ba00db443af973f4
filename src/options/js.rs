//! Option values that cross from JS untyped (`Unknown`), read as JS reads them: `== null` is
//! absent, `typeof` decides the type, and a refused value is rendered as lib/options.js's `show`
//! renders it. Option sets whose type checks live in Rust (a machine's, a process's) take their
//! fields this way, so that each option's every check, its JS type included, is in one function.

use napi::bindgen_prelude::{
    FromNapiValue, JsObjectValue, KeyCollectionMode, KeyConversion, KeyFilter, Object, Unknown,
};
use napi::{JsValue, Result, ValueType};

/// The value, unless it is `null` (napi-rs already reads an absent field or `undefined` as None).
pub fn given(v: Option<Unknown<'_>>) -> Result<Option<Unknown<'_>>> {
    match v {
        Some(u) if u.get_type()? != ValueType::Null => Ok(Some(u)),
        _ => Ok(None),
    }
}

/// The number, if `typeof v === 'number'`.
pub fn number(v: &Unknown) -> Result<Option<f64>> {
    if v.get_type()? == ValueType::Number {
        f64::from_unknown(*v).map(Some)
    } else {
        Ok(None)
    }
}

/// The number, if `Number.isInteger(v)`.
pub fn integer(v: &Unknown) -> Result<Option<f64>> {
    Ok(number(v)?.filter(|n| n.is_finite() && n.fract() == 0.0))
}

/// The boolean, if `typeof v === 'boolean'`.
pub fn boolean(v: &Unknown) -> Result<Option<bool>> {
    if v.get_type()? == ValueType::Boolean {
        bool::from_unknown(*v).map(Some)
    } else {
        Ok(None)
    }
}

/// The string, if `typeof v === 'string'`.
pub fn string(v: &Unknown) -> Result<Option<String>> {
    if v.get_type()? == ValueType::String {
        String::from_unknown(*v).map(Some)
    } else {
        Ok(None)
    }
}

/// The object, if `typeof v === 'object'` and `v !== null` (arrays included).
pub fn object<'e>(v: &Unknown<'e>) -> Result<Option<Object<'e>>> {
    if v.get_type()? == ValueType::Object {
        Object::from_unknown(*v).map(Some)
    } else {
        Ok(None)
    }
}

/// The elements, if `Array.isArray(v)`; a hole reads as `undefined`, as an index loop reads it.
pub fn array<'e>(v: &Unknown<'e>) -> Result<Option<Vec<Unknown<'e>>>> {
    if v.get_type()? != ValueType::Object || !v.is_array()? {
        return Ok(None);
    }
    let a = Object::from_unknown(*v)?;
    (0..a.get_array_length()?)
        .map(|i| a.get_element::<Unknown>(i))
        .collect::<Result<_>>()
        .map(Some)
}

/// `Object.entries(o)`: own enumerable string-keyed properties, in the object's key order.
pub fn entries<'e>(o: &Object<'e>) -> Result<Vec<(String, Unknown<'e>)>> {
    let keys = o.get_all_property_names(
        KeyCollectionMode::OwnOnly,
        KeyFilter::Enumerable,
        KeyConversion::NumbersToStrings,
    )?;
    let mut out = Vec::new();
    for i in 0..keys.get_array_length()? {
        let key = keys.get_element::<Unknown>(i)?;
        // Symbol keys: Object.entries skips them.
        if let Some(k) = string(&key)? {
            // By the key's JS value: a name with a NUL byte has no C string.
            out.push((k, o.get_property::<_, Unknown>(key)?));
        }
    }
    Ok(out)
}

/// A short, safe rendering of any value for messages, as lib/options.js's `show` gives it.
pub fn show(v: &Unknown) -> Result<String> {
    Ok(match v.get_type()? {
        ValueType::String => quoted(&String::from_unknown(*v)?),
        ValueType::BigInt => format!("{}n", coerced(v)?),
        ValueType::Symbol => "symbol".into(),
        ValueType::Function => "function".into(),
        ValueType::Null => "null".into(),
        ValueType::Object | ValueType::External if v.is_array()? => "an array".into(),
        ValueType::Object | ValueType::External => "an object".into(),
        _ => coerced(v)?,
    })
}

/// `String(v)`, for the types whose rendering JS defines (numbers above all).
fn coerced(v: &Unknown) -> Result<String> {
    v.coerce_to_string()?.into_utf8()?.into_owned()
}

/// `JSON.stringify` of the string cut at 60 UTF-16 units, `...` marking the cut, as `show` does.
pub fn quoted(s: &str) -> String {
    let units: Vec<u16> = s.encode_utf16().collect();
    if units.len() <= 60 {
        return json(s);
    }
    match String::from_utf16(&units[..60]) {
        Ok(head) => json(&format!("{head}...")),
        // The cut split a surrogate pair: JSON.stringify writes the lone half as an escape.
        Err(_) => {
            let head = json(&String::from_utf16_lossy(&units[..59]));
            format!("{}\\u{:04x}...\"", &head[..head.len() - 1], units[59])
        }
    }
}

fn json(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn strings_are_shown_as_json_stringify_shows_them() {
        assert_eq!(quoted("a\"b\n\u{1}"), r#""a\"b\n\u0001""#);
        assert_eq!(quoted(&"x".repeat(60)), format!("\"{}\"", "x".repeat(60)));
        assert_eq!(
            quoted(&"x".repeat(61)),
            format!("\"{}...\"", "x".repeat(60))
        );
        // 59 units, then a pair cut in two: the high half stays, escaped.
        let s = format!("{}\u{1F600}", "x".repeat(59));
        assert_eq!(quoted(&s), format!("\"{}\\ud83d...\"", "x".repeat(59)));
        assert_eq!(
            quoted(&"é".repeat(61)),
            format!("\"{}...\"", "é".repeat(60))
        );
    }
}
