import ArgumentParser

@main
struct Natter: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "natter")
}
