@testable import HammockCore
import HammockJSON
@testable import HammockRendering
import Testing

private let now = Timestamp(millisecondsSince1970: 1_700_000_000_000)
private let plain = WatchScreen.Style(colors: false)

/// Two sources (one with data 3 s old, one failing twice) and a view of both.
private func sampleScreen() -> WatchScreen {
    var screen = WatchScreen(
        title: "demo.yaml", sources: ["weather", "api"], views: [ViewDefinition(id: "board", sources: ["weather", "api"])])
    screen.apply(.source(
        id: "weather", event: nil,
        state: SourceState(content: ["temp": 21], timestamp: now + .seconds(-3))))
    screen.apply(.source(
        id: "api", event: nil,
        state: SourceState(
            latestError: SourceError(message: "HTTP 503 Service Unavailable\nretry later", httpStatus: 503),
            timestamp: now + .seconds(-125), failures: 2)))
    screen.apply(.view(
        id: "board",
        state: ViewState(
            status: .error, content: .null,
            latestError: SourceError(message: "HTTP 503 Service Unavailable"),
            errors: [(source: "api", error: SourceError(message: "HTTP 503 Service Unavailable"))], canTryAgain: true)))
    return screen
}

/// The width of a line as a terminal shows it, escape sequences left out.
private func columns(_ line: String) -> Int {
    var visible = ""
    var inEscape = false
    for character in line {
        if character == "\u{1B}" { inEscape = true; continue }
        if inEscape { if character.isLetter { inEscape = false }; continue }
        visible.append(character)
    }
    return displayWidth(of: visible)
}

@Suite struct WatchScreenTests {
    @Test func at80ColumnsEachRowShowsMarkIdAgeFailuresAndTheErrorOrPreview() {
        var screen = sampleScreen()
        let lines = screen.lines(width: 80, height: 24, now: now, style: plain)
        #expect(lines.count == 24)
        #expect(lines[0] == "hammock watch · demo.yaml · 2 sources, 1 view · 2 failing")
        #expect(lines[1].hasPrefix("▸ ● weather  3 s ago"), "\(lines[1])")
        #expect(lines[1].hasSuffix(#"{"temp":21}"#), "\(lines[1])")
        #expect(lines[2].hasPrefix("  ✗ api      2 min ago   ×2    error: HTTP 503 Service Unavailable"), "\(lines[2])")
        #expect(!lines[2].contains("retry later"), "only the error's first line")
        #expect(lines[3].hasPrefix("  ✗ board    2 min ago   ×2    error: HTTP 503"), "a view is as old as its oldest source: \(lines[3])")
        #expect(lines[23].contains("r retry") && lines[23].contains("q quit"))
        #expect(lines.allSatisfy { columns($0) <= 80 })
        #expect(lines.allSatisfy { !$0.contains("\u{1B}") }, "no colors asked for")
    }

    @Test func at40ColumnsLinesAreCutWithAnEllipsis() {
        var screen = sampleScreen()
        let lines = screen.lines(width: 40, height: 10, now: now, style: plain)
        #expect(lines.count == 10)
        for line in lines { #expect(columns(line) <= 40, "\(line)") }
        #expect(lines[0].hasSuffix("…") && columns(lines[0]) == 40)
        #expect(lines[2].hasPrefix("  ✗ api") && lines[2].hasSuffix("…"))
    }

    @Test func wideCharactersCountTwoColumns() {
        var screen = WatchScreen(title: "t", sources: ["wide"], views: [])
        screen.apply(.source(id: "wide", event: nil, state: SourceState(content: .string(String(repeating: "漢", count: 40)), timestamp: now)))
        let lines = screen.lines(width: 40, height: 5, now: now, style: plain)
        #expect(columns(lines[1]) <= 40 && columns(lines[1]) >= 39, "\(lines[1])")
    }

    @Test func agesFollowNow() {
        var screen = sampleScreen()
        #expect(screen.lines(width: 80, height: 24, now: now + .seconds(60), style: plain)[1].contains("1 min ago"))
        #expect(screen.lines(width: 80, height: 24, now: now + .seconds(2 * 3600), style: plain)[1].contains("2 h ago"))
        var fresh = WatchScreen(title: "t", sources: ["new"], views: [])
        #expect(fresh.lines(width: 80, height: 5, now: now, style: plain)[1].contains("waiting for the first state"))
        fresh.apply(.source(id: "new", event: .requested, state: SourceState(isLoading: true)))
        let loading = fresh.lines(width: 80, height: 5, now: now, style: plain)[1]
        #expect(loading.hasPrefix("▸ ◌ new") && loading.contains("never") && loading.hasSuffix("loading"), "\(loading)")
    }

    @Test func selectionMovesWithinTheRowsAndNamesWhatKeysActOn() {
        var screen = sampleScreen()
        #expect(screen.selected == .source("weather"))
        screen.move(by: -1)
        #expect(screen.selected == .source("weather"))
        screen.move(by: 1)
        #expect(screen.selected?.target == .source("api"))
        screen.move(by: 5)
        #expect(screen.selected?.target == .view("board"))
        let lines = screen.lines(width: 80, height: 24, now: now, style: plain)
        #expect(lines[3].hasPrefix("▸ ✗ board") && lines[1].hasPrefix("  ● weather"))
        // A reload that removes the selected row selects the first.
        screen.apply(.removed(id: "board", what: "view"))
        #expect(screen.selected == .source("weather"))
    }

    @Test func theSelectedRowStaysOnAShortScreen() {
        var screen = WatchScreen(title: "t", sources: (1...10).map { "s\($0)" }, views: [])
        screen.move(by: 8)
        let lines = screen.lines(width: 40, height: 5, now: now, style: plain)
        #expect(lines.count == 5)
        #expect(lines.dropFirst().dropLast().contains { $0.hasPrefix("▸ · s9") }, "\(lines)")
    }

    @Test func colorsOnlyWhenAskedAndTheSelectionIsReversed() {
        var screen = sampleScreen()
        let colored = screen.lines(width: 80, height: 24, now: now, style: WatchScreen.Style(colors: true))
        #expect(colored[1].hasPrefix("\u{1B}[7m"), "selected: reverse video")
        #expect(colored[1].contains("\u{1B}[32m●"), "data: green")
        #expect(colored[2].contains("\u{1B}[31m✗"), "error: red")
        #expect(colored.allSatisfy { columns($0) <= 80 })
        let ascii = screen.lines(width: 80, height: 24, now: now, style: WatchScreen.Style(colors: false, unicode: false))
        #expect(ascii[1].hasPrefix("> * weather") && ascii[2].hasPrefix("  x api") && ascii[2].contains("x2"))
        #expect(ascii.allSatisfy { $0.unicodeScalars.allSatisfy(\.isASCII) }, "\(ascii)")
    }

    @Test func secretsAreRedactedAndControlCharactersCannotReachTheTerminal() {
        var screen = WatchScreen(title: "t", sources: ["s"], views: [])
        screen.apply(.source(
            id: "s", event: nil,
            state: SourceState(
                content: .string("token hunter2 \u{1B}[2J"),
                latestError: SourceError(message: "denied for hunter2"), timestamp: now)))
        let lines = screen.lines(width: 80, height: 5, now: now, style: plain, redactor: Redactor(secrets: ["hunter2"]))
        #expect(!lines.joined().contains("hunter2"))
        #expect(lines[1].contains("error: denied for [redacted]") && lines[1].contains("token [redacted]"), "\(lines[1])")
        #expect(!lines.joined().contains("\u{1B}"))
    }

    @Test func keysAreParsedFromRawBytes() {
        #expect(WatchKey.parse(Array("jkrlq".utf8)) == [.down, .up, .retry, .load, .quit])
        #expect(WatchKey.parse([0x1A, UInt8(ascii: "j")]) == [.suspend, .down])
        #expect(WatchKey.parse([0x1B, 0x5B, 0x41, 0x1B, 0x5B, 0x42, 0x1B, 0x4F, 0x42]) == [.up, .down, .down])
        #expect(WatchKey.parse(Array("x\u{1B}[C".utf8)).isEmpty, "other keys are ignored")
    }
}

/// `hammock watch` redraws at most 10 times a second (README), whatever the rate of change.
@Suite struct WatchFrameThrottle {
    /// The frames drawn over `milliseconds`, a state changing every millisecond when `busy`.
    func frames(over milliseconds: Int64, busy: Bool) -> [Int64] {
        var throttle = FrameThrottle()
        var dirty = true
        var drawn: [Int64] = []
        for ms in 0..<milliseconds {
            let now: MonotonicInstant = at(ms: ms)
            if busy { dirty = true }
            if throttle.nextFrame(dirty: dirty, now: now) <= now {
                throttle.drew(at: now)
                dirty = false
                drawn.append(ms)
            }
        }
        return drawn
    }

    @Test func aStateThatChangesEveryMillisecondIsDrawnTenTimesASecond() {
        let drawn = frames(over: 3000, busy: true)
        #expect(drawn.count == 30, "\(drawn)")
        #expect(drawn.prefix(3) == [0, 100, 200])
        // In no second, wherever it starts, more than 10 frames.
        for start in drawn { #expect(drawn.filter { $0 >= start && $0 < start + 1000 }.count <= 10) }
    }

    @Test func withoutChangesTheScreenIsDrawnOnceASecondForTheAges() {
        #expect(frames(over: 3500, busy: false) == [0, 1000, 2000, 3000])
    }
}
