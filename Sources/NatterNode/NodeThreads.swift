import NIOCore
import NIOPosix
import Synchronization

/// The threads node actors run on, apart from Swift's shared cooperative pool, one per running node. The actor does
/// blocking work — SQLite reads, fsynced commits, refreshing conversation tables — and on the shared pool (as many
/// threads as cores) two busy nodes, or one node and its front end, would hold every thread. With a thread of its
/// own, each node in a process (tests, benchmarks, the flood test's five) is scheduled by the system as a separate
/// process would be: one node's long turn — a relay ingesting a flood — never holds another node's heartbeats
/// (a fixed set of threads taken round-robin did, once a test process ran more nodes than threads, and a linked
/// peer took the stalled node for dead). A node gives its thread back when it shuts down; a free thread is reused
/// and never shut down (idle, it costs nothing; jobs of a stopped node still queued run there harmlessly).
final class NodeThreads: Sendable {
    /// Threads made at most; past that, nodes share the least used ones.
    static let threadsMax = 64

    static let shared = NodeThreads()

    private struct Slot {
        let group: MultiThreadedEventLoopGroup
        var nodes: Int
    }

    private let threads = Mutex<[Slot]>([])

    /// A node's hold on a thread: given back once, when the node shuts down or, if it never ran, is released.
    final class Lease: Sendable {
        let loop: any EventLoop
        private let threads: NodeThreads
        private let ended = Mutex(false)

        fileprivate init(loop: any EventLoop, threads: NodeThreads) {
            self.loop = loop
            self.threads = threads
        }

        func end() {
            guard !ended.withLock({ ended in defer { ended = true }; return ended }) else { return }
            threads.giveBack(loop)
        }

        deinit { end() }
    }

    /// A thread for a new node: a free one, else a new one, else (at `threadsMax`) the least used.
    func take() -> Lease {
        let loop = threads.withLock { threads -> any EventLoop in
            let leastUsed = threads.indices.min { threads[$0].nodes < threads[$1].nodes }
            if let index = leastUsed, threads[index].nodes == 0 || threads.count >= Self.threadsMax {
                threads[index].nodes += 1
                return threads[index].group.next()
            }
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            threads.append(Slot(group: group, nodes: 1))
            return group.next()
        }
        return Lease(loop: loop, threads: self)
    }

    private func giveBack(_ loop: any EventLoop) {
        threads.withLock { threads in
            guard let index = threads.firstIndex(where: { $0.group.next() === loop }) else { return }
            threads[index].nodes -= 1
        }
    }

    /// How many threads exist and how many nodes run on the busiest (for tests).
    var usage: (threads: Int, busiest: Int) {
        threads.withLock { ($0.count, $0.map(\.nodes).max() ?? 0) }
    }
}
