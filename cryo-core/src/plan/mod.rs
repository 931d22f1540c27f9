//! Planning: which maintenance each table needs, partition by partition, under byte budgets,
//! in the fixed operation order ([`crate::ops::Operation::ORDER`]).

mod model;

pub use model::*;
