//! [`impl_columns!`](crate::impl_columns): a [`Columns`](super::Columns) impl from a struct's
//! field names, grouped by how each field travels.

/// Implements [`Columns`](crate::columns::Columns) for a struct with named fields:
///
/// ```ignore
/// impl_columns! {
///     Elements {
///         columns [size_bytes, addr, version];   // Vec<impl Value> or OptU32Column: one array each
///         columns [piece_t0, piece_y0];          // another table (lengths checked per table)
///         header [markers, warnings];            // serde, in the message header
///         nested [elements];                     // a Columns type, packed flat (names unique)
///         skip [received_ms];                    // not shipped; Default when unpacked
///         check = check_fn;                      // fn(&Self) -> Result<(), ColumnError>
///     }
/// }
/// ```
///
/// Every group is optional, in this order. Each field of the struct must be named exactly once:
/// the impl destructures the struct without `..` and builds it with a struct literal, so a new
/// field that is not listed is a compile error here. The field types come from the struct.
#[macro_export]
macro_rules! impl_columns {
    (
        $ty:ident {
            $( columns [ $($col:ident),+ $(,)? ]; )*
            $( header [ $($head:ident),+ $(,)? ]; )?
            $( nested [ $($nest:ident),+ $(,)? ]; )?
            $( skip [ $($skip:ident),+ $(,)? ]; )?
            $( check = $check:path; )?
        }
    ) => {
        impl $crate::columns::Columns for $ty {
            fn pack(&self, sink: &mut impl $crate::columns::ColumnSink) {
                let $ty {
                    $($($col,)+)*
                    $($($head,)+)?
                    $($($nest,)+)?
                    $($($skip: _,)+)?
                } = self;
                $($( $crate::columns::Field::put_field($col, sink, stringify!($col)); )+)*
                $($( $crate::columns::ColumnSink::head(sink, stringify!($head), $head); )+)?
                $($( $crate::columns::Columns::pack($nest, sink); )+)?
            }

            fn unpack(
                src: &mut impl $crate::columns::ColumnSource,
            ) -> ::core::result::Result<Self, $crate::columns::ColumnError> {
                let value = $ty {
                    $($( $col: $crate::columns::Field::take_field(src, stringify!($col))?, )+)*
                    $($( $head: $crate::columns::ColumnSource::take_head(src, stringify!($head))?, )+)?
                    $($( $nest: $crate::columns::Columns::unpack(src)?, )+)?
                    $($( $skip: ::core::default::Default::default(), )+)?
                };
                $( $crate::columns::same_length(&[ $( (stringify!($col), $crate::columns::Field::field_len(&value.$col)) ),+ ])?; )*
                $( $check(&value)?; )?
                ::core::result::Result::Ok(value)
            }
        }
    };
}
