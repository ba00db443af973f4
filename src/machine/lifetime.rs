//! A machine's lifetime: `machine({ lifetimeS, onTimeout })` and `setTimeout(seconds)`. Past its
//! end the machine is closed, or paused (`onTimeout: 'pause'`). The clock does not count while
//! the machine is paused; resume() after a timeout's pause re-arms the whole lifetime, as E2B's
//! `onTimeout: 'pause'` sandboxes come back with their timeout anew.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use napi::bindgen_prelude::Unknown;
use tokio::sync::Notify;

use super::Machine;
use crate::errors::{Error, Result};
use crate::options::js::{self, given};

/// A year, the longest lifetime (as for every other seconds option).
const MAX_LIFETIME_S: f64 = 365.0 * 24.0 * 3600.0;

#[derive(Clone, Copy, Default, PartialEq, Debug)]
pub enum OnTimeout {
    #[default]
    Close,
    Pause,
}

/// `lifetimeS` and `onTimeout` as `sbx.machine()` was given them.
#[derive(Default)]
pub struct LifetimeConfig {
    pub lifetime: Option<Duration>,
    pub on_timeout: OnTimeout,
}

impl LifetimeConfig {
    pub fn from_options(
        lifetime_s: Option<Unknown>,
        on_timeout: Option<Unknown>,
    ) -> napi::Result<Self> {
        let lifetime = match given(lifetime_s)? {
            None => None,
            Some(v) => Some(seconds("lifetimeS", js::number(&v)?)?),
        };
        let on_timeout = match given(on_timeout)? {
            None => OnTimeout::Close,
            Some(v) => match js::string(&v)?.as_deref() {
                Some("close") => OnTimeout::Close,
                Some("pause") => OnTimeout::Pause,
                _ => {
                    return Err(Error::InvalidOption(format!(
                        "onTimeout must be 'close' or 'pause', got {}",
                        js::show(&v)?
                    ))
                    .into())
                }
            },
        };
        Ok(LifetimeConfig {
            lifetime,
            on_timeout,
        })
    }
}

/// A lifetime in seconds: positive, at most a year; the message names the option.
pub fn seconds(name: &str, n: Option<f64>) -> Result<Duration> {
    match n {
        Some(n) if n.is_finite() && n > 0.0 && n <= MAX_LIFETIME_S => {
            Ok(Duration::from_secs_f64(n))
        }
        _ => Err(Error::InvalidOption(format!(
            "{name} must be a positive number of seconds, at most a year"
        ))),
    }
}

#[derive(Clone, Copy)]
enum Clock {
    /// No lifetime: the machine lives until it is closed.
    Off,
    Running {
        ends: Instant,
        ends_at: SystemTime,
    },
    /// Paused with this much left.
    Stopped(Duration),
    /// Paused by its own timeout (`onTimeout: 'pause'`): resume() re-arms the whole lifetime.
    Expired,
}

struct State {
    /// What resume() re-arms after a timeout's pause: `lifetimeS`, or the last `setTimeout`.
    full: Option<Duration>,
    on_timeout: OnTimeout,
    clock: Clock,
    paused: bool,
    /// The timer task runs (started with the first lifetime the machine gets).
    armed: bool,
}

pub struct Lifetime {
    state: Mutex<State>,
    /// Tells the timer task the clock changed.
    wake: Notify,
}

impl Default for Lifetime {
    fn default() -> Self {
        Lifetime {
            state: Mutex::new(State {
                full: None,
                on_timeout: OnTimeout::Close,
                clock: Clock::Off,
                paused: false,
                armed: false,
            }),
            wake: Notify::new(),
        }
    }
}

fn running(d: Duration) -> Clock {
    Clock::Running {
        ends: Instant::now() + d,
        ends_at: SystemTime::now() + d,
    }
}

impl Lifetime {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self) {
        self.wake.notify_one();
    }

    /// The clock stops; `expired`: the pause is the timeout's own.
    pub fn paused(&self, expired: bool) {
        let mut s = self.state();
        s.paused = true;
        if let Clock::Running { ends, .. } = s.clock {
            s.clock = if expired {
                Clock::Expired
            } else {
                Clock::Stopped(ends.saturating_duration_since(Instant::now()))
            };
        }
        drop(s);
        self.changed();
    }

    /// The clock runs again: with what was left, or the whole lifetime after a timeout's pause.
    pub fn resumed(&self) {
        let mut s = self.state();
        s.paused = false;
        s.clock = match s.clock {
            Clock::Stopped(left) => running(left),
            Clock::Expired => s.full.map(running).unwrap_or(Clock::Off),
            c => c,
        };
        drop(s);
        self.changed();
    }

    /// When the machine ends (or pauses) by its lifetime, in ms since the epoch; None without a
    /// lifetime, or while paused.
    pub fn ends_at_ms(&self) -> Option<f64> {
        match self.state().clock {
            Clock::Running { ends_at, .. } => ends_at
                .duration_since(UNIX_EPOCH)
                .ok()
                .map(|d| d.as_millis() as f64),
            _ => None,
        }
    }

    /// The instant the timer task waits for, if the clock runs.
    fn due(&self) -> Option<Instant> {
        match self.state().clock {
            Clock::Running { ends, .. } => Some(ends),
            _ => None,
        }
    }

    /// What to do if the clock ran out now (it may have been moved meanwhile).
    fn expired_now(&self) -> Option<OnTimeout> {
        let s = self.state();
        match s.clock {
            Clock::Running { ends, .. } if ends <= Instant::now() => Some(s.on_timeout),
            _ => None,
        }
    }
}

impl Machine {
    /// Gives the machine its lifetime from `sbx.machine()`, counted from now.
    pub fn set_lifetime(self: &Arc<Self>, cfg: LifetimeConfig) {
        {
            let mut s = self.lifetime.state();
            s.on_timeout = cfg.on_timeout;
            s.full = cfg.lifetime;
        }
        if let Some(d) = cfg.lifetime {
            self.set_timeout(d).ok();
        }
    }

    /// E2B's setTimeout: the machine's lifetime ends `d` from now (from its resume, when paused).
    pub fn set_timeout(self: &Arc<Self>, d: Duration) -> Result<()> {
        if self.closing.load(std::sync::atomic::Ordering::Acquire) || !self.alive() {
            return Err(Error::MachineGone("the machine is closed".into()));
        }
        let arm = {
            let mut s = self.lifetime.state();
            s.full = Some(d);
            s.clock = if s.paused {
                Clock::Stopped(d)
            } else {
                running(d)
            };
            !std::mem::replace(&mut s.armed, true)
        };
        self.lifetime.changed();
        if arm {
            run(
                Arc::downgrade(self),
                self.lifetime.clone(),
                self.stop.clone(),
            );
        }
        Ok(())
    }

    pub fn ends_at_ms(&self) -> Option<f64> {
        self.lifetime.ends_at_ms()
    }
}

/// The timer: sleeps until the clock's end (woken whenever it changes) and then closes or pauses
/// the machine. Ends with the machine.
fn run(m: Weak<Machine>, lt: Arc<Lifetime>, stop: Arc<crate::lifecycle::cancel::Cancel>) {
    crate::task::spawn(async move {
        loop {
            let due = lt.due();
            let sleep = async {
                match due {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = sleep => {}
                _ = lt.wake.notified() => continue,
                _ = stop.fired() => return,
            }
            let Some(what) = lt.expired_now() else {
                continue;
            };
            let Some(m) = m.upgrade() else {
                return;
            };
            match what {
                OnTimeout::Close => {
                    m.close().await;
                    return;
                }
                OnTimeout::Pause => {
                    // A box that cannot be frozen is past its lifetime all the same.
                    if m.pause_as(true).await.is_err() {
                        m.close().await;
                        return;
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_positive_seconds_up_to_a_year() {
        assert!(seconds("lifetimeS", Some(0.5)).is_ok());
        for bad in [None, Some(0.0), Some(-1.0), Some(f64::NAN), Some(4e7)] {
            let e = seconds("lifetimeS", bad).unwrap_err();
            assert!(e.to_string().starts_with("lifetimeS must be"), "{e}");
        }
    }

    #[test]
    fn the_clock_stops_while_paused_and_a_timeouts_pause_rearms_it_whole() {
        let lt = Lifetime::default();
        {
            let mut s = lt.state();
            s.full = Some(Duration::from_secs(100));
            s.clock = running(Duration::from_secs(50));
        }
        assert!(lt.ends_at_ms().is_some());
        lt.paused(false);
        assert!(lt.ends_at_ms().is_none() && lt.due().is_none());
        assert!(
            matches!(lt.state().clock, Clock::Stopped(d) if d <= Duration::from_secs(50) && d > Duration::from_secs(40))
        );
        lt.resumed();
        let left = lt.due().unwrap().saturating_duration_since(Instant::now());
        assert!(left <= Duration::from_secs(50) && left > Duration::from_secs(40));
        lt.paused(true);
        assert!(matches!(lt.state().clock, Clock::Expired));
        lt.resumed();
        let left = lt.due().unwrap().saturating_duration_since(Instant::now());
        assert!(left > Duration::from_secs(90), "the whole lifetime again");
        assert_eq!(lt.expired_now(), None);
    }
}
