import Foundation

extension LabReport {
    /// Dissemination over time as a hand-written SVG: for each operation (up to
    /// `LabLimits.pictureOperationsMax`, evenly sampled), the fraction of live nodes holding it, as a step line from
    /// its publication; partitions shaded, crashes marked, the heal a dashed line.
    public var svg: String {
        let width = 960.0
        let height = 480.0
        let (left, right, top, bottom) = (60.0, 20.0, 40.0, 50.0)
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let start = workloadStart ?? .zero
        let end = max(endedAt, start + .milliseconds(1))
        let span = seconds(end - start)
        func x(_ time: Duration) -> Double { left + plotWidth * max(0, seconds(time - start)) / span }
        func y(_ fraction: Double) -> Double { top + plotHeight * (1 - fraction) }
        func f(_ value: Double) -> String { String(format: "%.1f", value) }
        let colours = [
            "message": "#1f77b4", "reaction": "#ff7f0e", "receipt": "#2ca02c", "add": "#9467bd", "remove": "#d62728",
        ]

        var out = [String]()
        out.append(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
                + "viewBox=\"0 0 \(Int(width)) \(Int(height))\" font-family=\"sans-serif\" font-size=\"12\">")
        out.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>")
        let c = configuration
        out.append(
            "<text x=\"\(f(left))\" y=\"20\" font-size=\"14\">Dissemination: \(c.nodes) nodes, "
                + "\(formatDuration(c.latency)) links, \(formatNumber(c.rate)) ops/s, seed \(c.seed)"
                + (passed ? "" : " (FAILED)") + "</text>")
        for span in partitionSpans {
            out.append(
                "<rect x=\"\(f(x(span.start)))\" y=\"\(f(top))\" width=\"\(f(x(span.start + span.length) - x(span.start)))\" "
                    + "height=\"\(f(plotHeight))\" fill=\"#f4cccc\"/>")
        }
        // Axes and grid.
        for step in 0...4 {
            let fraction = Double(step) / 4
            out.append(
                "<line x1=\"\(f(left))\" y1=\"\(f(y(fraction)))\" x2=\"\(f(left + plotWidth))\" y2=\"\(f(y(fraction)))\" "
                    + "stroke=\"#ddd\"/>")
            out.append(
                "<text x=\"\(f(left - 8))\" y=\"\(f(y(fraction) + 4))\" text-anchor=\"end\">\(Int(fraction * 100))%</text>"
            )
        }
        let tick = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120].first { span / $0 <= 12 } ?? 300
        var mark = 0.0
        while mark <= span + 1e-9 {
            let position = left + plotWidth * mark / span
            out.append(
                "<line x1=\"\(f(position))\" y1=\"\(f(top + plotHeight))\" x2=\"\(f(position))\" "
                    + "y2=\"\(f(top + plotHeight + 5))\" stroke=\"black\"/>")
            out.append(
                "<text x=\"\(f(position))\" y=\"\(f(top + plotHeight + 18))\" text-anchor=\"middle\">"
                    + "\(formatNumber(mark))s</text>")
            mark += tick
        }
        out.append(
            "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(height - 10))\" text-anchor=\"middle\">"
                + "simulated time since the workload started</text>")
        out.append(
            "<text x=\"15\" y=\"\(f(top + plotHeight / 2))\" transform=\"rotate(-90 15 \(f(top + plotHeight / 2)))\" "
                + "text-anchor=\"middle\">live nodes holding the operation</text>")
        out.append(
            "<rect x=\"\(f(left))\" y=\"\(f(top))\" width=\"\(f(plotWidth))\" height=\"\(f(plotHeight))\" "
                + "fill=\"none\" stroke=\"black\"/>")
        // One step line per operation.
        let total = Double(max(liveNodes, 1))
        for spread in spreads {
            var points = ["\(f(x(spread.publishedAt))),\(f(y(0)))"]
            for (count, time) in spread.appliedAt.enumerated() {
                let previous = Double(count) / total
                points.append("\(f(x(time))),\(f(y(previous)))")
                points.append("\(f(x(time))),\(f(y(Double(count + 1) / total)))")
            }
            out.append(
                "<polyline points=\"\(points.joined(separator: " "))\" fill=\"none\" "
                    + "stroke=\"\(colours[spread.kind] ?? "#555")\" stroke-opacity=\"0.35\"/>")
        }
        for time in crashTimes {
            out.append(
                "<line x1=\"\(f(x(time)))\" y1=\"\(f(top))\" x2=\"\(f(x(time)))\" y2=\"\(f(top + plotHeight))\" "
                    + "stroke=\"#d62728\"/>")
            out.append("<text x=\"\(f(x(time) + 3))\" y=\"\(f(top + 12))\" fill=\"#d62728\">crash</text>")
        }
        if let healAt {
            out.append(
                "<line x1=\"\(f(x(healAt)))\" y1=\"\(f(top))\" x2=\"\(f(x(healAt)))\" y2=\"\(f(top + plotHeight))\" "
                    + "stroke=\"black\" stroke-dasharray=\"4 3\"/>")
            out.append("<text x=\"\(f(x(healAt) + 3))\" y=\"\(f(top + 26))\">heal</text>")
        }
        // Legend.
        var legendX = left + plotWidth - 330
        for kind in ["message", "reaction", "receipt", "add", "remove"] {
            out.append(
                "<line x1=\"\(f(legendX))\" y1=\"28\" x2=\"\(f(legendX + 16))\" y2=\"28\" stroke=\"\(colours[kind]!)\" "
                    + "stroke-width=\"3\"/>")
            out.append("<text x=\"\(f(legendX + 20))\" y=\"32\">\(kind)</text>")
            legendX += 66
        }
        out.append("</svg>")
        return out.joined(separator: "\n") + "\n"
    }
}
