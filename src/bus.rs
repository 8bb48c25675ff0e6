//! Typed in-process channels between roles running in one process. The API server stays
//! the source of truth; the bus only shortens hot paths (a fresh node usage reaches the
//! local scheduler without a watch round trip). Publishers never block: a subscriber that
//! falls behind loses the oldest events and is told how many.

use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::broadcast;

/// The koordlet measured a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsageUpdate {
    pub node: String,
    pub cpu_milli: i64,
    pub memory_bytes: i64,
    pub at: SystemTime,
}

/// The manager rendered a new NodeSLO spec for a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSloChanged {
    pub node: String,
    pub resource_version: String,
}

/// A pod was evicted (koordlet QoS, descheduler).
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionEvent {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub reason: String,
    pub by: String,
}

/// One broadcast topic.
#[derive(Clone)]
pub struct Topic<T> {
    tx: broadcast::Sender<Arc<T>>,
}

impl<T: Send + Sync + 'static> Topic<T> {
    pub fn new(capacity: usize) -> Self {
        Self {
            tx: broadcast::channel(capacity.max(1)).0,
        }
    }

    /// Publishes without waiting; returns how many subscribers will see it.
    pub fn publish(&self, event: T) -> usize {
        self.tx.send(Arc::new(event)).unwrap_or(0)
    }

    pub fn subscribe(&self) -> Subscription<T> {
        Subscription {
            rx: self.tx.subscribe(),
            lagged: 0,
        }
    }
}

pub struct Subscription<T> {
    rx: broadcast::Receiver<Arc<T>>,
    lagged: u64,
}

impl<T: Send + Sync + 'static> Subscription<T> {
    /// The next event; events lost to lag are counted and skipped. `None` when every
    /// publisher is gone.
    pub async fn recv(&mut self) -> Option<Arc<T>> {
        loop {
            match self.rx.recv().await {
                Ok(ev) => return Some(ev),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.lagged += n;
                    tracing::debug!(lost = n, "bus subscriber lagged");
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Events this subscriber lost because it was too slow.
    pub fn lagged(&self) -> u64 {
        self.lagged
    }
}

/// Every topic, shared by the roles of one process.
#[derive(Clone)]
pub struct Bus {
    pub node_usage: Topic<NodeUsageUpdate>,
    pub node_slo: Topic<NodeSloChanged>,
    pub evictions: Topic<EvictionEvent>,
}

impl Default for Bus {
    fn default() -> Self {
        Self::new(1024)
    }
}

impl Bus {
    pub fn new(capacity: usize) -> Self {
        Self {
            node_usage: Topic::new(capacity),
            node_slo: Topic::new(capacity),
            evictions: Topic::new(capacity),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn usage(i: i64) -> NodeUsageUpdate {
        NodeUsageUpdate {
            node: "n".into(),
            cpu_milli: i,
            memory_bytes: 0,
            at: SystemTime::UNIX_EPOCH,
        }
    }

    #[tokio::test]
    async fn lagging_subscriber_does_not_block_publisher() {
        let bus = Bus::new(8);
        let mut slow = bus.node_usage.subscribe();
        let mut fast = bus.node_usage.subscribe();
        // The slow subscriber never reads while 1000 events go out; publishing must finish
        // promptly regardless.
        let publish = async {
            for i in 0..1000 {
                bus.node_usage.publish(usage(i));
                if i % 8 == 7 {
                    // Let the fast subscriber keep up.
                    tokio::task::yield_now().await;
                }
            }
        };
        let read_fast = async {
            let mut last = -1;
            while last < 999 {
                last = fast.recv().await.unwrap().cpu_milli;
            }
            last
        };
        let (_, last) = tokio::time::timeout(Duration::from_secs(5), async {
            tokio::join!(publish, read_fast)
        })
        .await
        .expect("publisher blocked");
        assert_eq!(last, 999);
        // The slow one sees only the newest events and knows how many it lost.
        let first = slow.recv().await.unwrap().cpu_milli;
        assert_eq!(first, 992);
        assert_eq!(slow.lagged(), 992);
    }

    #[tokio::test]
    async fn closed_when_publishers_gone() {
        let topic = Topic::<EvictionEvent>::new(4);
        let mut sub = topic.subscribe();
        assert_eq!(
            topic.publish(EvictionEvent {
                namespace: "a".into(),
                name: "b".into(),
                node: "n".into(),
                reason: "r".into(),
                by: "t".into()
            }),
            1
        );
        drop(topic);
        assert!(sub.recv().await.is_some());
        assert!(sub.recv().await.is_none());
    }
}
