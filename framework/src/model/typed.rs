//! Terraform types of model fields, so a model used as an object *value* (one attribute holding an object, as
//! `ha_master_cluster.spec` is) declares its fields once: [`typed_object!`](crate::typed_object) writes the struct
//! and its object type from the same list, and a field added to one cannot be missing from the other.

use std::collections::BTreeMap;

use tfplugin::value::Type;

use super::Val;

/// The Terraform type a model field holds.
pub trait TfType {
    fn tf_type() -> Type;
}

impl TfType for String {
    fn tf_type() -> Type {
        Type::String
    }
}

impl TfType for bool {
    fn tf_type() -> Type {
        Type::Bool
    }
}

impl TfType for i64 {
    fn tf_type() -> Type {
        Type::Number
    }
}

impl<T: TfType> TfType for Vec<T> {
    fn tf_type() -> Type {
        Type::list(T::tf_type())
    }
}

impl<T: TfType> TfType for BTreeMap<String, T> {
    fn tf_type() -> Type {
        Type::map(T::tf_type())
    }
}

/// Null and unknown are values of every type.
impl<T: TfType> TfType for Val<T> {
    fn tf_type() -> Type {
        T::tf_type()
    }
}

impl<T: TfType> TfType for Option<T> {
    fn tf_type() -> Type {
        T::tf_type()
    }
}

/// A model struct whose Terraform object type is derived from its fields: each field is an attribute of the
/// same name, typed by [`TfType`]. Attributes (`#[derive]`, docs, `#[serde]` on the struct) pass through; a
/// field renamed by serde would name another attribute than its type says, so field attributes other than docs
/// are not accepted.
///
/// ```
/// use tfplugin_framework::{Val, typed_object, model::TfType};
/// typed_object! {
///     #[derive(Debug, Clone)]
///     pub struct Endpoint {
///         /// The address.
///         pub host: Val<String>,
///         pub port: Val<i64>,
///     }
/// }
/// assert_eq!(
///     Endpoint::tf_type(),
///     tfplugin::value::Type::object([("host", tfplugin::value::Type::String), ("port", tfplugin::value::Type::Number)]),
/// );
/// ```
#[macro_export]
macro_rules! typed_object {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:expr])*
                $fvis:vis $field:ident : $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                $fvis $field: $ty,
            )*
        }

        impl $crate::model::TfType for $name {
            fn tf_type() -> $crate::tfplugin::value::Type {
                $crate::tfplugin::value::Type::object([
                    $((stringify!($field), <$ty as $crate::model::TfType>::tf_type()),)*
                ])
            }
        }
    };
}
