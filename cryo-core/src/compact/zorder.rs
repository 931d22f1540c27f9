//! Z-order values: each column mapped to 8 order-preserving bytes, the bits interleaved (most
//! significant first), as Spark's `zorder` does. Sorting rows by the result clusters them in
//! all columns at once.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, BinaryArray};
use arrow_schema::{DataType, TimeUnit};

use crate::error::{Error, Result};

/// Most columns a z-order interleaves (each contributes 64 bits).
pub const MAX_ZORDER_COLUMNS: usize = 8;

fn signed(v: i64) -> u64 {
    (v as u64) ^ (1 << 63)
}

fn float(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn bytes_prefix(b: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = b.len().min(8);
    buf[..n].copy_from_slice(&b[..n]);
    u64::from_be_bytes(buf)
}

/// The first 8 bytes of every non-null value of a string or binary column, big-endian.
fn bytes_bits<'a>(a: &'a ArrayRef, value: impl Fn(usize) -> &'a [u8]) -> Vec<u64> {
    (0..a.len())
        .map(|i| {
            if a.is_null(i) {
                0
            } else {
                bytes_prefix(value(i))
            }
        })
        .collect()
}

/// Order-preserving 64-bit image of every row of a column (nulls sort first, as 0).
fn column_bits(a: &ArrayRef) -> Result<Vec<u64>> {
    macro_rules! prim {
        ($t:ty, $f:expr) => {{
            let arr = a.as_primitive::<$t>();
            (0..arr.len())
                .map(|i| if arr.is_null(i) { 0 } else { $f(arr.value(i)) })
                .collect()
        }};
    }
    let out: Vec<u64> = match a.data_type() {
        DataType::Boolean => {
            let arr = a.as_boolean();
            (0..arr.len())
                .map(|i| match (arr.is_null(i), arr.value(i)) {
                    (true, _) => 0,
                    (false, false) => 1 << 62,
                    (false, true) => 3 << 62,
                })
                .collect()
        }
        DataType::Int8 => prim!(Int8Type, |v: i8| signed(i64::from(v))),
        DataType::Int16 => prim!(Int16Type, |v: i16| signed(i64::from(v))),
        DataType::Int32 => prim!(Int32Type, |v: i32| signed(i64::from(v))),
        DataType::Int64 => prim!(Int64Type, signed),
        DataType::Date32 => prim!(Date32Type, |v: i32| signed(i64::from(v))),
        DataType::Date64 => prim!(Date64Type, signed),
        DataType::Time32(TimeUnit::Second) => {
            prim!(Time32SecondType, |v: i32| signed(i64::from(v)))
        }
        DataType::Time32(_) => prim!(Time32MillisecondType, |v: i32| signed(i64::from(v))),
        DataType::Time64(TimeUnit::Microsecond) => prim!(Time64MicrosecondType, signed),
        DataType::Time64(_) => prim!(Time64NanosecondType, signed),
        DataType::Timestamp(TimeUnit::Second, _) => prim!(TimestampSecondType, signed),
        DataType::Timestamp(TimeUnit::Millisecond, _) => prim!(TimestampMillisecondType, signed),
        DataType::Timestamp(TimeUnit::Microsecond, _) => prim!(TimestampMicrosecondType, signed),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => prim!(TimestampNanosecondType, signed),
        DataType::Float32 => prim!(Float32Type, |v: f32| float(f64::from(v))),
        DataType::Float64 => prim!(Float64Type, float),
        // Decimals beyond the i64 range saturate: order is kept, resolution among them is lost.
        DataType::Decimal128(_, _) => prim!(Decimal128Type, |v: i128| signed(
            i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
        )),
        DataType::Utf8 => bytes_bits(a, |i| a.as_string::<i32>().value(i).as_bytes()),
        DataType::LargeUtf8 => bytes_bits(a, |i| a.as_string::<i64>().value(i).as_bytes()),
        DataType::Binary => bytes_bits(a, |i| a.as_binary::<i32>().value(i)),
        DataType::LargeBinary => bytes_bits(a, |i| a.as_binary::<i64>().value(i)),
        DataType::FixedSizeBinary(_) => bytes_bits(a, |i| a.as_fixed_size_binary().value(i)),
        other => {
            return Err(Error::unsupported(format!("z-order on a {other} column")));
        }
    };
    Ok(out)
}

/// The z-value of every row: the columns' 64-bit images, bits interleaved, big-endian bytes.
pub(crate) fn zvalues(columns: &[ArrayRef]) -> Result<BinaryArray> {
    let k = columns.len();
    if k == 0 || k > MAX_ZORDER_COLUMNS {
        return Err(Error::validation(format!(
            "z-order takes 1 to {MAX_ZORDER_COLUMNS} columns"
        )));
    }
    let rows = columns[0].len();
    let images = columns
        .iter()
        .map(column_bits)
        .collect::<Result<Vec<_>>>()?;
    let width = 8 * k;
    let mut values = vec![0u8; rows * width];
    for r in 0..rows {
        let out = &mut values[r * width..(r + 1) * width];
        let mut bit = 0usize;
        for b in (0..64).rev() {
            for img in &images {
                if (img[r] >> b) & 1 == 1 {
                    out[bit / 8] |= 0x80 >> (bit % 8);
                }
                bit += 1;
            }
        }
    }
    Ok(BinaryArray::from_iter_values(values.chunks(width)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Float64Array, Int64Array, StringArray};

    use super::*;

    #[test]
    fn images_keep_order() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![i64::MIN, -5, 0, 7, i64::MAX]));
        let b = column_bits(&ints).unwrap();
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        let f: ArrayRef = Arc::new(Float64Array::from(vec![-1e9, -0.5, 0.0, 0.25, 3e8]));
        let b = column_bits(&f).unwrap();
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        let s: ArrayRef = Arc::new(StringArray::from(vec!["", "a", "ab", "b", "zzzzzzzzz"]));
        let b = column_bits(&s).unwrap();
        assert!(b.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn interleaving_clusters_both_columns() {
        // In a 4x4 grid, z-order visits each 2x2 quadrant completely before the next.
        let xs: Vec<i64> = (0..16).map(|i| i % 4).collect();
        let ys: Vec<i64> = (0..16).map(|i| i / 4).collect();
        let z = zvalues(&[
            Arc::new(Int64Array::from(xs.clone())) as ArrayRef,
            Arc::new(Int64Array::from(ys.clone())),
        ])
        .unwrap();
        let mut order: Vec<usize> = (0..16).collect();
        order.sort_by(|&a, &b| z.value(a).cmp(z.value(b)));
        let quadrant = |i: usize| (xs[i] / 2, ys[i] / 2);
        for chunk in order.chunks(4) {
            assert!(chunk.iter().all(|&i| quadrant(i) == quadrant(chunk[0])));
        }
    }
}
