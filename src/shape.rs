//! Plain JS objects built from a struct's values in one call into JS. napi-rs sets an object's
//! fields one napi call at a time, each internalizing its key again; a call's result has nine, and
//! that was two thirds of the time its conversion took on the JS thread (about 11 us of a do-nothing
//! call's result, against 6.5 us this way). lib/native.js hands over, once, a function that returns
//! the object literal of its arguments; the native side passes the values in the order of the
//! fields. Until it has (the addon loaded on its own), the fields are set one by one.

use std::cell::RefCell;
use std::ffi::CStr;
use std::ptr;

use napi::bindgen_prelude::{check_status, Function, JsValue, ToNapiValue, Unknown};
use napi::{sys, Env};

/// The field names, in order, of a call's result (`NativeResult`).
pub const RESULT_FIELDS: [&CStr; 9] = [
    c"stdout",
    c"stderr",
    c"exitCode",
    c"durationMs",
    c"fault",
    c"files",
    c"truncated",
    c"rich",
    c"executionCount",
];

thread_local! {
    // A napi env lives on one thread; the env is kept to tell a later one on the same thread apart.
    static MAKER: RefCell<Option<(usize, sys::napi_ref)>> = const { RefCell::new(None) };
}

/// Takes the function that makes a call's result object: `fields` must name the result's fields
/// in their order ([`RESULT_FIELDS`]), which is the order of `make`'s parameters.
pub fn take_maker(
    env: Env,
    fields: Vec<String>,
    make: Function<'_, Unknown<'_>, Unknown<'_>>,
) -> napi::Result<()> {
    let ours = RESULT_FIELDS.map(|f| f.to_str().unwrap_or_default());
    if fields.len() != ours.len() || fields.iter().zip(ours).any(|(a, b)| a != b) {
        return Err(napi::Error::from_reason(format!(
            "shapeResults: the fields must be {ours:?}, in that order"
        )));
    }
    let mut made = ptr::null_mut();
    check_status!(
        // SAFETY: on the JS thread with its env; `make` is a live function value of it.
        unsafe { sys::napi_create_reference(env.raw(), make.raw(), 1, &mut made) },
        "keeping the result maker"
    )?;
    MAKER.with_borrow_mut(|m| {
        if let Some((e, old)) = m.take().filter(|(e, _)| *e == env.raw() as usize) {
            // SAFETY: a reference made on this env, which is still live.
            unsafe { sys::napi_delete_reference(e as sys::napi_env, old) };
        }
        *m = Some((env.raw() as usize, made));
    });
    Ok(())
}

/// A call's result object: `values` are its fields' values, in [`RESULT_FIELDS`] order. Made by
/// the function lib/native.js handed over when this env has one, else field by field.
///
/// # Safety
/// On `env`'s JS thread, with values made on `env`.
pub unsafe fn result_object(
    env: sys::napi_env,
    values: [sys::napi_value; RESULT_FIELDS.len()],
) -> napi::Result<sys::napi_value> {
    let maker = MAKER.with_borrow(|m| m.filter(|(e, _)| *e == env as usize).map(|(_, r)| r));
    let mut out = ptr::null_mut();
    if let Some(made) = maker {
        let mut make = ptr::null_mut();
        let mut this = ptr::null_mut();
        // SAFETY: on `env`'s JS thread, per this fn's contract; the reference was made on `env`.
        unsafe {
            check_status!(sys::napi_get_reference_value(env, made, &mut make))?;
            check_status!(sys::napi_get_undefined(env, &mut this))?;
            check_status!(sys::napi_call_function(
                env,
                this,
                make,
                values.len(),
                values.as_ptr(),
                &mut out
            ))?;
        }
        return Ok(out);
    }
    // SAFETY: as above.
    unsafe { check_status!(sys::napi_create_object(env, &mut out))? };
    for (name, value) in RESULT_FIELDS.iter().zip(values) {
        // SAFETY: as above; `name` is NUL-terminated.
        unsafe { check_status!(sys::napi_set_named_property(env, out, name.as_ptr(), value))? };
    }
    Ok(out)
}

/// `v`'s JS value, `undefined` for None (as napi-rs leaves an absent field; it would make null).
///
/// # Safety
/// On `env`'s JS thread.
pub unsafe fn optional<T: ToNapiValue>(
    env: sys::napi_env,
    v: Option<T>,
) -> napi::Result<sys::napi_value> {
    // SAFETY: per this fn's contract.
    unsafe {
        match v {
            Some(v) => T::to_napi_value(env, v),
            None => {
                let mut out = ptr::null_mut();
                check_status!(sys::napi_get_undefined(env, &mut out))?;
                Ok(out)
            }
        }
    }
}
