import Foundation
import NatterModel

/// The shape of the overlay at one moment: the graph of established links between live nodes, as their cores
/// report them (`connectedPeers`). Flooding with equal link delays delivers along shortest paths, so the
/// distances here bound what the latency figures can be.
public struct OverlayShape: Sendable, Equatable, CustomStringConvertible {
    public let nodes: Int
    public let degreeMin: Int
    public let degreeMean: Double
    public let degreeMax: Int
    /// Longest shortest path in hops; nil when the graph is not connected.
    public let diameter: Int?
    /// Mean shortest path in hops over connected ordered pairs.
    public let meanDistance: Double
    public let components: Int

    public var description: String {
        "\(nodes) nodes, degree \(degreeMin)–\(degreeMax) (mean \(formatFixed(degreeMean, 1))), "
            + (diameter.map { "diameter \($0) hops" } ?? "\(components) components") + ", mean distance "
            + "\(formatFixed(meanDistance, 2)) hops"
    }
}

extension Simulation {
    /// The overlay now.
    func overlayShape() -> OverlayShape {
        let live = nodes.filter(\.isUp)
        var position = [Int: Int]()
        for (offset, node) in live.enumerated() { position[node.index] = offset }
        var byAuthor = [AuthorKey: Int]()
        for node in live { byAuthor[AuthorKey(node.author.bytes)] = position[node.index] }
        var neighbours = [[Int]](repeating: [], count: live.count)
        for (offset, node) in live.enumerated() {
            let peers = node.core?.connectedPeers.keys.sorted() ?? []
            neighbours[offset] = peers.compactMap { byAuthor[AuthorKey($0.bytes)] }
        }
        let degrees = neighbours.map(\.count)
        var diameter = 0
        var distanceSum = 0
        var pairs = 0
        var components = 0
        var seen = [Bool](repeating: false, count: live.count)
        for source in live.indices {
            var distance = [Int](repeating: -1, count: live.count)
            distance[source] = 0
            var queue = [source]
            var head = 0
            while head < queue.count {
                let current = queue[head]
                head += 1
                for next in neighbours[current] where distance[next] < 0 {
                    distance[next] = distance[current] + 1
                    queue.append(next)
                }
            }
            if !seen[source] {
                components += 1
                for reached in queue { seen[reached] = true }
            }
            for value in distance where value > 0 {
                diameter = max(diameter, value)
                distanceSum += value
                pairs += 1
            }
        }
        return OverlayShape(
            nodes: live.count, degreeMin: degrees.min() ?? 0,
            degreeMean: live.isEmpty ? 0 : Double(degrees.reduce(0, +)) / Double(live.count),
            degreeMax: degrees.max() ?? 0, diameter: components == 1 ? diameter : nil,
            meanDistance: pairs > 0 ? Double(distanceSum) / Double(pairs) : 0, components: components)
    }
}

/// An author's bytes as a dictionary key (lookups only; never iterated).
struct AuthorKey: Hashable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
}

func formatFixed(_ value: Double, _ decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
}
