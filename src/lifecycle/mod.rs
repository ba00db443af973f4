//! A box's life: finding kern, building its argv, starting it (one-shot or resident), watching
//! its deadline and teardown, classifying how it ended, and making sure nothing of it outlives
//! the session or the process.

pub mod argv;
pub mod boxes;
pub mod cancel;
pub mod cleanup;
pub mod egress;
pub mod fault;
pub mod launch;
pub mod locate;
pub mod outcome;
pub mod procfs;
pub mod spawn;
