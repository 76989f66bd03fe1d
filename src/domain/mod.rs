//! Values with a meaning of their own that travel through every layer —
//! from the verified principal, the browser session or the settings down
//! to the query — so they are types rather than loose strings. Nothing
//! here imports a module above `config`.

mod provider_name;
pub mod shown_text;
mod user;

pub use provider_name::{InvalidProviderName, ProviderName};
pub use user::UserRef;
