//! Space-filling-curve values: each column mapped to 8 order-preserving bytes, then
//!
//! - **z-order**: the bits interleaved (most significant first), as Spark's `zorder` does;
//! - **Hilbert**: the point's index on the Hilbert curve of as many dimensions (Skilling's
//!   transform of the coordinates, "Programming the Hilbert curve", AIP Conf. Proc. 707, 2004,
//!   then the same interleaving). Consecutive Hilbert indices are neighbours in space, so a
//!   file's range of the curve is a compact box in every column; z-order jumps across the space
//!   at every quadrant boundary, and files that straddle one span far more of each column.
//!
//! Sorting rows by either value clusters them in all columns at once.

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

/// A space-filling curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Curve {
    /// Bits interleaved.
    Z,
    /// The Hilbert curve.
    Hilbert,
}

/// The curve value of every row as big-endian bytes (8 per column): sorting by it orders the
/// rows along `curve`.
pub(crate) fn curve_values(columns: &[ArrayRef], curve: Curve) -> Result<BinaryArray> {
    let k = columns.len();
    if k == 0 || k > MAX_ZORDER_COLUMNS {
        return Err(Error::validation(format!(
            "a curve order takes 1 to {MAX_ZORDER_COLUMNS} columns"
        )));
    }
    let rows = columns[0].len();
    let images = columns
        .iter()
        .map(column_bits)
        .collect::<Result<Vec<_>>>()?;
    let width = 8 * k;
    let mut values = vec![0u8; rows * width];
    let mut point = vec![0u64; k];
    for r in 0..rows {
        for (p, img) in point.iter_mut().zip(&images) {
            *p = img[r];
        }
        if curve == Curve::Hilbert {
            hilbert_transpose(&mut point);
        }
        interleave(&point, &mut values[r * width..(r + 1) * width]);
    }
    Ok(BinaryArray::from_iter_values(values.chunks(width)))
}

/// The bits of `point`'s coordinates interleaved, most significant first, into `out`.
fn interleave(point: &[u64], out: &mut [u8]) {
    let mut bit = 0usize;
    for b in (0..64).rev() {
        for &x in point {
            if (x >> b) & 1 == 1 {
                out[bit / 8] |= 0x80 >> (bit % 8);
            }
            bit += 1;
        }
    }
}

/// Skilling's transform: the coordinates of a point become the "transposed" Hilbert index,
/// whose bits interleaved (as z-order interleaves coordinates) are the point's index on the
/// curve of `point.len()` dimensions and 64 bits per dimension.
fn hilbert_transpose(coords: &mut [u64]) {
    let dims = coords.len();
    // Inverse undo: walk the bits from the top, exchanging and inverting the bits below.
    let mut bit: u64 = 1 << 63;
    while bit > 1 {
        let below = bit - 1;
        for i in 0..dims {
            if coords[i] & bit != 0 {
                coords[0] ^= below;
            } else {
                let swap = (coords[0] ^ coords[i]) & below;
                coords[0] ^= swap;
                coords[i] ^= swap;
            }
        }
        bit >>= 1;
    }
    // Gray encode.
    for i in 1..dims {
        coords[i] ^= coords[i - 1];
    }
    let mut flip = 0;
    let mut bit: u64 = 1 << 63;
    while bit > 1 {
        if coords[dims - 1] & bit != 0 {
            flip ^= bit - 1;
        }
        bit >>= 1;
    }
    for c in coords.iter_mut() {
        *c ^= flip;
    }
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

    /// The Hilbert index of every cell of a `side` × `side` grid (coordinates in the top bits,
    /// as images of small values are not: any scale keeps the order).
    fn hilbert_order(side: u64) -> Vec<(u64, u64)> {
        let shift = 64 - side.trailing_zeros();
        let xs: Vec<i64> = (0..side * side).map(|i| (i % side) as i64).collect();
        let ys: Vec<i64> = (0..side * side).map(|i| (i / side) as i64).collect();
        let scaled = |v: &[i64]| -> ArrayRef {
            // Spread the values over the top bits of the image (64-bit signed, sign flipped).
            Arc::new(Int64Array::from(
                v.iter()
                    .map(|&x| ((x as u64) << shift).wrapping_add(1 << 63) as i64)
                    .collect::<Vec<_>>(),
            ))
        };
        let h = curve_values(&[scaled(&xs), scaled(&ys)], Curve::Hilbert).unwrap();
        let mut order: Vec<usize> = (0..(side * side) as usize).collect();
        order.sort_by(|&a, &b| h.value(a).cmp(h.value(b)));
        order
            .into_iter()
            .map(|i| (xs[i] as u64, ys[i] as u64))
            .collect()
    }

    #[test]
    fn hilbert_steps_to_a_neighbour_every_time() {
        for side in [2u64, 4, 8, 16] {
            let path = hilbert_order(side);
            assert_eq!(path.len() as u64, side * side);
            assert_eq!(path[0], (0, 0), "the curve starts in a corner");
            for w in path.windows(2) {
                let d = w[0].0.abs_diff(w[1].0) + w[0].1.abs_diff(w[1].1);
                assert_eq!(d, 1, "side {side}: {:?} to {:?}", w[0], w[1]);
            }
        }
    }

    #[test]
    fn hilbert_takes_up_to_eight_columns() {
        let col = |v: Vec<i64>| -> ArrayRef { Arc::new(Int64Array::from(v)) };
        let cols: Vec<ArrayRef> = (0..MAX_ZORDER_COLUMNS)
            .map(|c| col((0..100).map(|i| (i * (c as i64 + 3)) % 17).collect()))
            .collect();
        let h = curve_values(&cols, Curve::Hilbert).unwrap();
        assert_eq!(h.len(), 100);
        assert!(h.iter().all(|v| v.unwrap().len() == 8 * MAX_ZORDER_COLUMNS));
        // Equal points, equal indices.
        let twice = curve_values(&[col(vec![5, 5]), col(vec![9, 9])], Curve::Hilbert).unwrap();
        assert_eq!(twice.value(0), twice.value(1));
        assert!(curve_values(&[], Curve::Hilbert).is_err());
    }

    #[test]
    fn interleaving_clusters_both_columns() {
        // In a 4x4 grid, z-order visits each 2x2 quadrant completely before the next.
        let xs: Vec<i64> = (0..16).map(|i| i % 4).collect();
        let ys: Vec<i64> = (0..16).map(|i| i / 4).collect();
        let z = curve_values(
            &[
                Arc::new(Int64Array::from(xs.clone())) as ArrayRef,
                Arc::new(Int64Array::from(ys.clone())),
            ],
            Curve::Z,
        )
        .unwrap();
        let mut order: Vec<usize> = (0..16).collect();
        order.sort_by(|&a, &b| z.value(a).cmp(z.value(b)));
        let quadrant = |i: usize| (xs[i] / 2, ys[i] / 2);
        for chunk in order.chunks(4) {
            assert!(chunk.iter().all(|&i| quadrant(i) == quadrant(chunk[0])));
        }
    }
}
