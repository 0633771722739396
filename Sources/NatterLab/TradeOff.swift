import Foundation

/// The trade-off of the push interval: one run per interval, the same seed and setting otherwise, and a picture of
/// messages per operation against delivery latency (docs/lab.md, "Gossip efficiency"). A longer interval lets more
/// records share a frame and makes every hop wait longer.
public struct LabTradeOff: Sendable {
    /// One interval's run.
    public struct Point: Sendable {
        public let pushInterval: Duration
        public let report: LabReport
    }

    public let configuration: LabConfiguration
    public private(set) var points: [Point] = []

    public init(_ configuration: LabConfiguration) {
        self.configuration = configuration
    }

    /// Runs `configuration` once per interval, in order; `progress` is told each point as it is measured.
    public mutating func run(intervals: [Duration], progress: (Point) -> Void = { _ in }) throws(LabError) {
        for interval in intervals {
            var configuration = self.configuration
            configuration.pushInterval = interval
            let point = Point(pushInterval: interval, report: try Lab.run(configuration))
            points.append(point)
            progress(point)
        }
    }

    /// The Markdown table's header: interval, messages/op, p50, p95, max, redundant copies, bytes/op, checks.
    public static let tableHeader = [
        "| push interval | messages/op | p50 | p95 | max | redundant copies | bytes/op | checks |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    /// One point's row of the table.
    public static func row(_ point: Point) -> String {
        let report = point.report
        let latency = report.latency
        return "| \(formatDuration(point.pushInterval)) | \(String(format: "%.1f", report.framesPerOperation)) | "
            + "\(latency.map { millis($0.p50) } ?? "-") | \(latency.map { millis($0.p95) } ?? "-") | "
            + "\(latency.map { millis($0.max) } ?? "-") | \(String(format: "%.2f", report.redundancy)) | "
            + "\(Int(report.bytesPerOperation.rounded())) | \(report.passed ? "passed" : "FAILED") |"
    }

    static func millis(_ duration: Duration) -> String { String(format: "%.1f ms", seconds(duration) * 1_000) }

    /// Messages per operation across, latency up: for each interval its median (circle), p95 (triangle) and maximum
    /// (square) joined by a line, labelled with the interval; the targets dashed (`messagesTarget` across, the
    /// latency targets up).
    public func svg(messagesTarget: Double = 15, latencyTargets: [Duration] = [.milliseconds(300), .milliseconds(500)])
        -> String
    {
        var picture = SVGPicture(width: 760, height: 520)
        let c = configuration
        picture.text(
            x: 70, y: 24,
            "Push interval trade-off: \(c.nodes) nodes, \(formatDuration(c.latency)) links, "
                + "\(formatNumber(c.rate)) ops/s for \(formatDuration(c.duration)), seed \(c.seed)"
                + (c.nodeReceipts ? ", node receipts" : ""),
            size: 14)
        let left = 70.0, top = 50.0, width = 640.0, height = 400.0
        let messages = points.map(\.report.framesPerOperation) + [messagesTarget]
        let latencies = points.compactMap { $0.report.latency.map { seconds($0.max) * 1_000 } }
            + latencyTargets.map { seconds($0) * 1_000 }
        let xMax = (messages.max() ?? 1) * 1.1, yMax = (latencies.max() ?? 1) * 1.1
        func x(_ value: Double) -> Double { left + width * value / xMax }
        func y(_ value: Double) -> Double { top + height * (1 - value / yMax) }
        let n = SVGPicture.number
        picture.add(
            "<rect x=\"\(n(left))\" y=\"\(n(top))\" width=\"\(n(width))\" height=\"\(n(height))\" fill=\"none\" "
                + "stroke=\"black\"/>")
        for step in 0...5 {
            let xv = xMax * Double(step) / 5, yv = yMax * Double(step) / 5
            picture.text(x: x(xv), y: top + height + 18, String(format: "%.0f", xv), anchor: "middle")
            picture.text(x: left - 8, y: y(yv) + 4, String(format: "%.0f ms", yv), anchor: "end")
            picture.add(
                "<line x1=\"\(n(left))\" y1=\"\(n(y(yv)))\" x2=\"\(n(left + width))\" y2=\"\(n(y(yv)))\" stroke=\"#eee\"/>")
        }
        picture.text(x: left + width / 2, y: top + height + 38, "messages per operation", anchor: "middle")
        picture.add(
            "<line x1=\"\(n(x(messagesTarget)))\" y1=\"\(n(top))\" x2=\"\(n(x(messagesTarget)))\" "
                + "y2=\"\(n(top + height))\" stroke=\"#d62728\" stroke-dasharray=\"5 4\"/>")
        picture.text(x: x(messagesTarget) + 4, y: top + 14, "target \(formatNumber(messagesTarget))")
        for target in latencyTargets {
            let value = seconds(target) * 1_000
            picture.add(
                "<line x1=\"\(n(left))\" y1=\"\(n(y(value)))\" x2=\"\(n(left + width))\" y2=\"\(n(y(value)))\" "
                    + "stroke=\"#d62728\" stroke-dasharray=\"5 4\"/>")
            picture.text(x: left + width - 4, y: y(value) - 4, "target \(formatDuration(target))", anchor: "end")
        }
        for point in points {
            guard let latency = point.report.latency else { continue }
            let px = x(point.report.framesPerOperation)
            let p50 = y(seconds(latency.p50) * 1_000), p95 = y(seconds(latency.p95) * 1_000)
            let max = y(seconds(latency.max) * 1_000)
            picture.add(
                "<line x1=\"\(n(px))\" y1=\"\(n(p50))\" x2=\"\(n(px))\" y2=\"\(n(max))\" stroke=\"#1f77b4\"/>")
            picture.add("<circle cx=\"\(n(px))\" cy=\"\(n(p50))\" r=\"4\" fill=\"#1f77b4\"/>")
            picture.add(
                "<path d=\"M\(n(px)) \(n(p95 - 5)) L\(n(px + 5)) \(n(p95 + 4)) L\(n(px - 5)) \(n(p95 + 4)) Z\" "
                    + "fill=\"#ff7f0e\"/>")
            picture.add("<rect x=\"\(n(px - 4))\" y=\"\(n(max - 4))\" width=\"8\" height=\"8\" fill=\"#2ca02c\"/>")
            picture.text(x: px + 7, y: max - 6, formatDuration(point.pushInterval), size: 11)
        }
        picture.text(x: left, y: top + height + 62, "circle: median   triangle: p95   square: maximum delivery latency")
        return picture.rendered
    }
}
