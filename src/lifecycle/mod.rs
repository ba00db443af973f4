//! A box's life: building its argv, starting it (one-shot or resident), watching its deadline
//! and teardown, classifying how it ended, and making sure nothing of it outlives the session or
//! the process. (Finding kern is `crate::locate`, which the options use.)

pub mod argv;
pub mod boxes;
pub mod cancel;
pub mod cleanup;
pub mod egress;
pub mod fault;
pub mod launch;
pub mod outcome;
pub mod procfs;
pub mod spawn;
pub mod workload;
