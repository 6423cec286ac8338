// hammock-dashboard: configs/demo.yaml as a small terminal dashboard, through HammockClient.
//
//   swift build && .build/debug/hammock-dashboard [--once] [CONFIG]     (from the project's root)
//
// It redraws on every change; `--once` prints the first full screen, then exits.
import Foundation
import HammockClient

// The views' content, decoded straight from the engine's JSON: one member per source.
struct System: Decodable, Sendable {
    var load: String
    var clock: String
}

struct Overview: Decodable, Sendable {
    struct Status: Decodable, Sendable { var message: String; var level: String }
    struct Greeting: Decodable, Sendable { var text: String }
    var status: Status?
    var api: String?
    var greeting: Greeting?
}

let arguments = CommandLine.arguments.dropFirst()
let once = arguments.contains("--once")
let configuration = arguments.first { !$0.hasPrefix("--") } ?? "configs/demo.yaml"

let launched = ContinuousClock.now
let hammock = try await Hammock.launch(configuration: configuration)
let systemView = await hammock.view("system", as: System.self)
let dashboardView = await hammock.view("dashboard", as: Overview.self)

// The app's own data beside hammock's, under the same rules: seconds since launch.
let uptime = LoadableSequence {
    AsyncStream<Int> { feed in
        let ticker = Task {
            for second in 0... {
                feed.yield(second)
                try? await Task.sleep(for: .seconds(1))
                if Task.isCancelled { break }
            }
        }
        feed.onTermination = { _ in ticker.cancel() }
    }
}

// Content once every member has some; until then a spinner, or the first error.
let screen = LoadableGroup(ready: .all, members: ["system": systemView, "overview": dashboardView, "uptime": uptime])

func draw(_ state: ViewLoadableState<LoadableGroup.Content>) {
    let system = state.content?["system", as: System.self]
    let overview = state.content?["overview", as: Overview.self]
    let uptime = state.content?["uptime", as: Int.self]
    let milliseconds = (ContinuousClock.now - launched) / .milliseconds(1)
    var lines = [
        "hammock demo · \(state.status) · \(Int(milliseconds)) ms since launch",
        "  clock     \(system?.clock ?? "…")",
        "  load      \(system?.load ?? "…")",
        "  status    \(overview?.status.map { "\($0.level): \($0.message)" } ?? "…")",
        "  api       \(overview?.api ?? "…")",
        "  greeting  \(overview?.greeting?.text ?? "…")",
        "  uptime    \(uptime.map { "\($0) s" } ?? "…")",
    ]
    // The dashboard view's errors by source: it keeps showing data while `flaky` fails.
    for failure in dashboardView.errors {
        let status = failure.error.httpStatus.map { " (HTTP \($0))" } ?? ""
        lines.append("  ✗ \(failure.source): \(failure.error.message)\(status)")
    }
    // Clear the terminal and redraw, unless printing once (for a pipe or a test).
    print((once ? "" : "\u{1B}[H\u{1B}[2J") + lines.joined(separator: "\n"))
}

do {
    for try await state in screen.viewStates {
        if once {
            // The first full screen: every member has content, and the greeting (a 200 ms fake) is in.
            guard state.status == .data, state.content?["overview", as: Overview.self]?.greeting != nil else { continue }
            draw(state)
            break
        }
        draw(state)
    }
} catch {
    print("hammock-dashboard: \(error)")
}
await hammock.stop()
