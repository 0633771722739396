// Goal: the lab's small parts do exactly what the simulator relies on: events at one instant keep their order,
// options parse and print back the same, and impossible configurations are refused with a reason. Method: direct
// calls on the event queue, the parsers and `LabConfiguration.problem`.
import NatterModel
import Testing

@testable import NatterLab

@Suite("Lab parts")
struct UnitTests {
    @Test("the event queue pops by time, and events at one instant in the order they were scheduled")
    func eventOrder() {
        var queue = EventQueue<Int>()
        var generator = SeededGenerator(seed: 3)
        var expected = [(Duration, Int)]()
        for number in 0..<500 {
            let time = Duration.milliseconds(Int64(generator.next() % 20))
            queue.push(number, at: time)
            expected.append((time, number))
        }
        expected.sort { ($0.0, $0.1) < ($1.0, $1.1) }
        var popped = [(Duration, Int)]()
        while let (time, event) = queue.pop() { popped.append((time, event)) }
        #expect(popped.map(\.1) == expected.map(\.1))
    }

    @Test("durations, rates and partitions parse, and print back as the options accept them")
    func parsing() {
        #expect(parseDuration("100ms") == .milliseconds(100))
        #expect(parseDuration("1.5s") == .milliseconds(1_500))
        #expect(parseDuration("2m") == .seconds(120))
        #expect(parseDuration("250us") == .microseconds(250))
        #expect(parseDuration("3") == .seconds(3))
        #expect(parseDuration("-1s") == nil && parseDuration("fast") == nil)
        #expect(parseRate("100/s") == 100 && parseRate("6000/m") == 100 && parseRate("7") == 7)
        for text in ["0s", "100ms", "1500ms", "20s", "250us"] {
            #expect(formatDuration(parseDuration(text)!) == text)
        }
        #expect(LabWindow(parsing: "10s:3s") == LabWindow(start: .seconds(10), length: .seconds(3)))
        #expect(LabWindow(parsing: "10s") == nil && LabWindow(parsing: "10s:0s") == nil)
    }

    @Test("impossible configurations are refused with a reason a person can act on")
    func problems() {
        var configuration = LabConfiguration()
        #expect(configuration.problem == nil)
        configuration.partitions = [LabWindow(start: .seconds(19), length: .seconds(2))]
        #expect(configuration.problem?.contains("must heal within the workload") == true)
        configuration.partitions = [
            LabWindow(start: .seconds(1), length: .seconds(3)), LabWindow(start: .seconds(2), length: .seconds(1)),
        ]
        #expect(configuration.problem?.contains("overlap") == true)
        configuration = LabConfiguration()
        configuration.nodes = 1
        #expect(configuration.problem?.contains("--nodes") == true)
        configuration = LabConfiguration()
        configuration.crashes = 25
        #expect(configuration.problem != nil)
        configuration = LabConfiguration()
        configuration.latency = .zero
        #expect(configuration.problem?.contains("latency") == true)
        #expect(throws: LabError.self) { try LabSimulation(configuration) }
    }

    @Test("the replay command names every option that differs from the defaults")
    func commandLine() {
        var configuration = LabConfiguration()
        configuration.seed = 17
        configuration.partitions = [LabWindow(start: .seconds(10), length: .milliseconds(2_500))]
        configuration.crashRestarts = 2
        configuration.resetRate = 0.05
        configuration.churn = true
        #expect(
            configuration.commandLine
                == "natter lab run --seed 17 --nodes 25 --latency 100ms --jitter 0s --rate 100 --duration 20s "
                + "--partition 10s:2500ms --crash-restart 2 --reset-rate 0.05 --churn")
    }
}
