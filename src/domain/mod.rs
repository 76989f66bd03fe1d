//! Values with a meaning of their own that travel through every layer —
//! from the verified principal or the browser session down to the query —
//! so they are types rather than loose strings. Nothing here imports a
//! module above `config`.

mod user;

pub use user::UserRef;
