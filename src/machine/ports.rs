//! Exposed ports: a listener on the host's loopback whose every connection is relayed, through the
//! agent, to a port on the machine's own loopback. Nothing is published on other interfaces, and
//! it works the same with the machine's network off.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::freeze::Gate;
use super::wire::SharedConn;
use crate::errors::{Error, Result};
use crate::lifecycle::cancel::Cancel;

/// Traffic from the machine's side of one relayed connection.
pub enum FromBox {
    Data(Vec<u8>),
    Eof,
    Closed,
}

/// Relayed connections by the agent's stream id.
pub type Streams = Arc<Mutex<HashMap<u32, mpsc::UnboundedSender<FromBox>>>>;

/// Binds 127.0.0.1:0 for `port` and relays its connections until `stop` fires.
pub async fn expose(
    conn: SharedConn,
    streams: Streams,
    port: u16,
    stop: Arc<Cancel>,
    gate: Gate,
) -> Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| Error::io("could not listen on 127.0.0.1", e))?;
    let host_port = listener
        .local_addr()
        .map_err(|e| Error::io("could not read the listener's address", e))?
        .port();
    crate::task::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = stop.fired() => return,
            };
            let Ok((tcp, _)) = accepted else { continue };
            let _ = tcp.set_nodelay(true);
            let (conn, streams, stop) = (conn.clone(), streams.clone(), stop.clone());
            let gate = gate.clone();
            crate::task::spawn(async move { relay(conn, streams, port, tcp, stop, gate).await });
        }
    });
    Ok(host_port)
}

/// One connection: opened in the machine, then bytes both ways until both sides are done. While
/// the machine is paused nothing is sent to its agent: a new connection waits to be opened, and
/// a client's bytes wait in its socket.
async fn relay(
    conn: SharedConn,
    streams: Streams,
    port: u16,
    tcp: TcpStream,
    stop: Arc<Cancel>,
    gate: Gate,
) {
    tokio::select! {
        _ = gate.thawed() => {}
        _ = stop.fired() => return,
    }
    let Ok(opened) = conn.request("connect", json!({ "port": port }), &[]).await else {
        return; // refused in the machine: dropping `tcp` resets the client
    };
    let Some(id) = opened.u32("stream") else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    streams
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, tx);
    let (mut rd, mut wr) = tcp.into_split();
    // The machine's side decides when the connection is over: a client's EOF is passed on and
    // the answer still flows back until the machine closes its socket. `up` is told to stop
    // between frames, never cancelled inside a send (half a frame would break the connection).
    let (done_tx, mut done) = tokio::sync::oneshot::channel::<()>();
    let up = {
        let conn = conn.clone();
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                tokio::select! {
                    _ = gate.thawed() => {}
                    _ = &mut done => return,
                }
                let read = tokio::select! {
                    r = rd.read(&mut buf) => r,
                    _ = &mut done => return,
                };
                match read {
                    Ok(0) | Err(_) => {
                        let _ = conn.send(&json!({"t": "eof", "stream": id}), &[]).await;
                        return;
                    }
                    Ok(n) => {
                        let head = json!({"t": "data", "stream": id});
                        if conn.send(&head, &buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    };
    let down = async move {
        while let Some(m) = rx.recv().await {
            match m {
                FromBox::Data(d) => {
                    if wr.write_all(&d).await.is_err() {
                        return;
                    }
                }
                FromBox::Eof => {
                    let _ = wr.shutdown().await;
                }
                FromBox::Closed => return,
            }
        }
    };
    let up = crate::task::spawn(up);
    tokio::select! {
        _ = down => {}
        _ = stop.fired() => {}
    }
    let _ = done_tx.send(());
    let _ = up.await;
    streams
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id);
    let _ = conn.send(&json!({"t": "close", "stream": id}), &[]).await;
}
