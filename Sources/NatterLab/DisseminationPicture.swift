import Foundation

extension LabReport {
    /// Dissemination over time as a hand-written SVG, in two panels. Above: for each operation (up to
    /// `LabLimits.pictureOperationsMax`, evenly sampled), the fraction of live nodes holding it over the run, as a
    /// step line from its publication; partitions shaded, crashes marked, the heal a dashed line. Below: the same
    /// lines shifted to start at their publication, with the median over operations in black, so the shape of
    /// delivery (hops, waits) shows however long the run.
    public var svg: String {
        var picture = SVGPicture(width: 960, height: 800)
        let c = configuration
        picture.text(
            x: 60, y: 22,
            "Dissemination: \(c.nodes) nodes, \(formatDuration(c.latency)) links (jitter \(formatDuration(c.jitter))), "
                + "\(formatNumber(c.rate)) ops/s for \(formatDuration(c.duration)), seed \(c.seed)"
                + (passed ? "" : " — FAILED"),
            size: 14)
        picture.legend(x: 560, y: 44)

        // Above: over the run.
        let start = workloadStart ?? .zero
        let end = max(endedAt, start + .milliseconds(1))
        let above = SVGPicture.Panel(left: 60, top: 60, width: 880, height: 300, span: seconds(end - start))
        for span in partitionSpans {
            picture.shade(above, from: seconds(span.start - start), to: seconds(span.start + span.length - start))
        }
        picture.axes(above, xLabel: "simulated time since the workload started")
        let total = Double(max(liveNodes, 1))
        for spread in spreads {
            picture.steps(
                above, from: seconds(spread.publishedAt - start),
                at: spread.appliedAt.map { seconds($0 - start) }, total: total, kind: spread.kind)
        }
        for time in crashTimes { picture.marker(above, at: seconds(time - start), "crash", colour: "#d62728") }
        if let healAt { picture.marker(above, at: seconds(healAt - start), "heal", colour: "black", dashed: true) }

        // Below: since each operation's publication.
        let offsets = spreads.map { spread in spread.appliedAt.map { seconds($0 - spread.publishedAt) } }
        let longest = max(offsets.compactMap(\.last).max() ?? 0, 0.001)
        let below = SVGPicture.Panel(left: 60, top: 440, width: 880, height: 300, span: longest * 1.05)
        picture.axes(below, xLabel: "simulated time since the operation was published")
        for (spread, times) in zip(spreads, offsets) {
            picture.steps(below, from: 0, at: times, total: total, kind: spread.kind)
        }
        if !offsets.isEmpty {
            // The median over operations of the fraction holding it, on 200 points.
            var points = [(Double, Double)]()
            for step in 0...200 {
                let time = below.span * Double(step) / 200
                var fractions = offsets.map { times in Double(times.filter { $0 <= time }.count) / total }
                fractions.sort()
                points.append((time, fractions[(fractions.count - 1) / 2]))
            }
            picture.line(below, points, colour: "black", width: 2)
            picture.text(x: 940, y: 432, "black: median over operations", anchor: "end")
        }
        return picture.rendered
    }
}

/// A tiny SVG writer: just what the dissemination picture draws.
struct SVGPicture {
    struct Panel {
        let left: Double
        let top: Double
        let width: Double
        let height: Double
        /// Seconds across the panel.
        let span: Double

        func x(_ time: Double) -> Double { left + width * min(max(time, 0), span) / span }
        func y(_ fraction: Double) -> Double { top + height * (1 - fraction) }
    }

    static let colours = [
        "message": "#1f77b4", "reaction": "#ff7f0e", "receipt": "#2ca02c", "add": "#9467bd", "remove": "#d62728",
    ]

    let width: Double
    let height: Double
    private var elements: [String] = []

    init(width: Double, height: Double) {
        self.width = width
        self.height = height
        elements.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>")
    }

    var rendered: String {
        ([
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(f(width))\" height=\"\(f(height))\" font-family=\"sans-serif\" font-size=\"12\">"
        ]
            + elements + ["</svg>"]).joined(separator: "\n") + "\n"
    }

    private func f(_ value: Double) -> String { Self.number(value) }

    /// A coordinate as the picture writes it: one decimal.
    static func number(_ value: Double) -> String { String(format: "%.1f", value) }

    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    private func escaped(_ text: String) -> String { Self.escaped(text) }

    /// Adds one element as written (the other pictures' own shapes).
    mutating func add(_ element: String) { elements.append(element) }

    mutating func text(x: Double, y: Double, _ text: String, size: Int = 12, anchor: String = "start") {
        elements.append(
            "<text x=\"\(f(x))\" y=\"\(f(y))\" font-size=\"\(size)\" text-anchor=\"\(anchor)\">\(escaped(text))</text>")
    }

    mutating func legend(x: Double, y: Double) {
        var position = x
        for kind in ["message", "reaction", "receipt", "add", "remove"] {
            elements.append(
                "<line x1=\"\(f(position))\" y1=\"\(f(y - 4))\" x2=\"\(f(position + 16))\" y2=\"\(f(y - 4))\" "
                    + "stroke=\"\(Self.colours[kind]!)\" stroke-width=\"3\"/>")
            text(x: position + 20, y: y, kind)
            position += 76
        }
    }

    mutating func shade(_ panel: Panel, from: Double, to: Double) {
        elements.append(
            "<rect x=\"\(f(panel.x(from)))\" y=\"\(f(panel.top))\" width=\"\(f(panel.x(to) - panel.x(from)))\" "
                + "height=\"\(f(panel.height))\" fill=\"#f4cccc\"/>")
    }

    mutating func axes(_ panel: Panel, xLabel: String) {
        for step in 0...4 {
            let fraction = Double(step) / 4
            elements.append(
                "<line x1=\"\(f(panel.left))\" y1=\"\(f(panel.y(fraction)))\" x2=\"\(f(panel.left + panel.width))\" "
                    + "y2=\"\(f(panel.y(fraction)))\" stroke=\"#ddd\"/>")
            text(x: panel.left - 8, y: panel.y(fraction) + 4, "\(Int(fraction * 100))%", anchor: "end")
        }
        let tick =
            [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120].first { panel.span / $0 <= 12 } ?? 300
        var mark = 0.0
        while mark <= panel.span + 1e-9 {
            let position = panel.x(mark)
            let bottom = panel.top + panel.height
            elements.append(
                "<line x1=\"\(f(position))\" y1=\"\(f(bottom))\" x2=\"\(f(position))\" y2=\"\(f(bottom + 5))\" "
                    + "stroke=\"black\"/>")
            let label = tick < 1 ? "\(Int((mark * 1000).rounded()))ms" : "\(formatNumber(mark))s"
            text(x: position, y: bottom + 18, label, anchor: "middle")
            mark += tick
        }
        text(x: panel.left + panel.width / 2, y: panel.top + panel.height + 36, xLabel, anchor: "middle")
        let middle = panel.top + panel.height / 2
        elements.append(
            "<text x=\"18\" y=\"\(f(middle))\" transform=\"rotate(-90 18 \(f(middle)))\" text-anchor=\"middle\">"
                + "live nodes holding it</text>")
        elements.append(
            "<rect x=\"\(f(panel.left))\" y=\"\(f(panel.top))\" width=\"\(f(panel.width))\" "
                + "height=\"\(f(panel.height))\" fill=\"none\" stroke=\"black\"/>")
    }

    /// A step line: from 0 at `from`, one more node of `total` at each time of `times` (sorted).
    mutating func steps(_ panel: Panel, from: Double, at times: [Double], total: Double, kind: String) {
        var points = ["\(f(panel.x(from))),\(f(panel.y(0)))"]
        for (count, time) in times.enumerated() {
            points.append("\(f(panel.x(time))),\(f(panel.y(Double(count) / total)))")
            points.append("\(f(panel.x(time))),\(f(panel.y(Double(count + 1) / total)))")
        }
        elements.append(
            "<polyline points=\"\(points.joined(separator: " "))\" fill=\"none\" "
                + "stroke=\"\(Self.colours[kind] ?? "#555")\" stroke-opacity=\"0.3\"/>")
    }

    mutating func line(_ panel: Panel, _ points: [(Double, Double)], colour: String, width: Double) {
        let text = points.map { "\(f(panel.x($0.0))),\(f(panel.y($0.1)))" }.joined(separator: " ")
        elements.append(
            "<polyline points=\"\(text)\" fill=\"none\" stroke=\"\(colour)\" stroke-width=\"\(f(width))\"/>")
    }

    mutating func marker(_ panel: Panel, at time: Double, _ label: String, colour: String, dashed: Bool = false) {
        elements.append(
            "<line x1=\"\(f(panel.x(time)))\" y1=\"\(f(panel.top))\" x2=\"\(f(panel.x(time)))\" "
                + "y2=\"\(f(panel.top + panel.height))\" stroke=\"\(colour)\""
                + (dashed ? " stroke-dasharray=\"4 3\"/>" : "/>"))
        elements.append(
            "<text x=\"\(f(panel.x(time) + 3))\" y=\"\(f(panel.top + 12))\" fill=\"\(colour)\">\(label)</text>")
    }
}
