import HammockCore
import HammockJSON
import HammockRendering
import Testing
#if canImport(Glibc)
import Glibc
#endif

private let now = Timestamp(millisecondsSince1970: 1_700_000_000_000)

private func view(_ id: ViewID, _ templates: [ViewRender.Field: String] = [:]) throws -> ViewDefinition {
    let render = try ViewRender(templates: templates.mapValues { try RenderTemplate.parse($0) })
    return ViewDefinition(id: id, sources: ["s"], render: templates.isEmpty ? nil : render)
}

private func line(_ id: ViewID, _ content: JSONValue, status: ViewStatus = .data) -> OutputLine {
    .view(id: id, state: ViewState(status: status, content: ["s": content], latestError: nil, errors: [], canTryAgain: false))
}

@Suite struct BarEncoding {
    @Test func i3barWritesTheHeaderThenAnArrayOfBlocksPerChange() throws {
        var encoder = BarEncoder(
            format: .i3bar,
            views: [try view("a", [.text: "a={{ s }}", .color: "#00ff00", .urgent: "{{ s }}"]), try view("b")])
        #expect(encoder.encode(line("a", 1), now: now, redactor: .none) == nil)  // b has no state yet
        let encoded = encoder.encode(line("b", "B\nmore"), now: now, redactor: .none)
        let first = try #require(encoded)
        let lines = first.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 4 && lines[3].isEmpty, "\(first)")
        let header = try JSONValue(parsing: Array(lines[0].utf8))
        #expect(header["version"]?.numberValue?.intValue == 1)
        #expect(header["click_events"] == .bool(true))
        #expect(header["stop_signal"]?.numberValue?.intValue == Int(BarEncoder.i3barStopSignal))
        #expect(header["cont_signal"]?.numberValue?.intValue == Int(BarEncoder.i3barContSignal))
        #expect(lines[1] == "[")
        #expect(lines[2] == ##"[{"name":"a","full_text":"a=1","color":"#00ff00","urgent":true},{"name":"b","full_text":"B","urgent":false}],"##)
        #expect(encoder.encode(line("b", "B"), now: now, redactor: .none) == nil)  // shows the same
        #expect(
            encoder.encode(line("a", false), now: now, redactor: .none)
                == ##"[{"name":"a","full_text":"a=false","color":"#00ff00","urgent":false},{"name":"b","full_text":"B","urgent":false}],"## + "\n")
    }

    @Test func i3barLeavesOutAColorItCannotRead() throws {
        for (color, shown) in [("#f00", false), ("red", false), ("#ff000080", true), ("#ff0000", true)] {
            var encoder = BarEncoder(format: .i3bar, views: [try view("v", [.color: color])])
            let encoded = encoder.encode(line("v", 1), now: now, redactor: .none)
            let text = try #require(encoded)
            #expect(text.contains("\"color\"") == shown, "\(color): \(text)")
        }
    }

    @Test func i3barShortTextOnlyWhenRendered() throws {
        var encoder = BarEncoder(
            format: .i3bar, views: [try view("a", [.text: "load {{ s }}", .short: "{{ s }}"]), try view("b", [.short: ""])])
        _ = encoder.encode(line("a", 0.5), now: now, redactor: .none)
        let line = encoder.encode(line("b", 2), now: now, redactor: .none)
        let encoded = try #require(line)
        #expect(encoded.hasSuffix(##"[{"name":"a","full_text":"load 0.5","short_text":"0.5","urgent":false},{"name":"b","full_text":"2","urgent":false}],"## + "\n"))
    }

    @Test func refreshRendersAgoAgainAndWritesOnlyWhatChanged() throws {
        var encoder = BarEncoder(format: .text, views: [try view("a", [.text: "{{ s | ago }}"])])
        #expect(encoder.dependsOnTime)
        let loaded = now.millisecondsSince1970 / 1000
        #expect(encoder.encode(line("a", .number(JSONNumber(Int(loaded)))), now: now, redactor: .none) == "just now\n")
        #expect(encoder.refresh(now: now, redactor: .none) == nil)
        let later = Timestamp(millisecondsSince1970: now.millisecondsSince1970 + 61_000)
        #expect(encoder.refresh(now: later, redactor: .none) == "1 min ago\n")
        #expect(encoder.refresh(now: Timestamp(millisecondsSince1970: later.millisecondsSince1970 + 500), redactor: .none) == nil)
        let plain = BarEncoder(format: .text, views: [try view("a", [.text: "{{ s | round }}"]), try view("b")])
        #expect(!plain.dependsOnTime)
    }

    @Test func i3barSignalsAreLinuxs() {
        #expect(BarEncoder.i3barStopSignal == SIGURG)
        #expect(BarEncoder.i3barContSignal == SIGCONT)
    }

    @Test func i3barNeedsNoViewList() {
        #expect(StdoutFormat.i3bar.checkSelection([]) == nil)
        #expect(StdoutFormat.i3bar.checkSelection(["a", "b"]) == nil)
    }

    @Test func textIsWrittenOncePerChangeOfWhatIsShown() throws {
        var encoder = BarEncoder(format: .text, views: [try view("v", [.text: "n={{ s | round }}"])])
        #expect(encoder.encode(line("v", 1.2), now: now, redactor: .none) == "n=1\n")
        // The view changed, what it shows did not.
        #expect(encoder.encode(line("v", 1.4), now: now, redactor: .none) == nil)
        #expect(encoder.encode(line("v", 2), now: now, redactor: .none) == "n=2\n")
    }

    @Test func everyOtherLineAndOtherViewsAreDropped() throws {
        var encoder = BarEncoder(format: .text, views: [try view("v")])
        let others: [OutputLine] = [
            .hello(sources: ["s"], views: ["v", "w"], version: "1"), .source(id: "s", event: nil, state: SourceState()),
            .ack(id: .string("1")), .error(message: "no"), .bye(reason: .signal, failed: nil), line("w", "other"),
        ]
        for other in others { #expect(encoder.encode(other, now: now, redactor: .none) == nil) }
        #expect(encoder.encode(line("v", "mine"), now: now, redactor: .none) == "mine\n")
    }

    @Test func severalViewsWaitForEachThenJoin() throws {
        var encoder = BarEncoder(format: .text, views: [try view("a"), try view("b")])
        #expect(encoder.encode(line("b", "B"), now: now, redactor: .none) == nil)
        #expect(encoder.encode(line("a", "A"), now: now, redactor: .none) == "A | B\n")
        #expect(encoder.encode(line("b", "B\nmore"), now: now, redactor: .none) == nil)  // first line only: same
        #expect(encoder.encode(line("b", "C"), now: now, redactor: .none) == "A | C\n")
    }

    @Test func lineBreaksInARenderedTextBecomeSpaces() throws {
        var encoder = BarEncoder(format: .text, views: [try view("v", [.text: "a\nb {{ s }}"])])
        #expect(encoder.encode(line("v", 1), now: now, redactor: .none) == "a b 1\n")
    }

    @Test func waybarObjects() throws {
        var encoder = BarEncoder(
            format: .waybar,
            views: [try view("v", [.text: "{{ s }}%", .percentage: "{{ s }}", .tooltip: "tip"])])
        let plain = encoder.encode(line("v", 50), now: now, redactor: .none)
        #expect(plain == #"{"text":"50%","alt":"data","tooltip":"tip","class":"data","percentage":50}"# + "\n")
        let encodedIdle = encoder.encode(line("v", .null, status: .idle), now: now, redactor: .none)
        let idle = try #require(encodedIdle)
        let value = try JSONValue(parsing: Array(idle.dropLast().utf8))
        #expect(value["alt"] == .string("idle"))
    }

    @Test func polybarColors() throws {
        var encoder = BarEncoder(format: .polybar, views: [try view("v", [.text: "{{ s }}", .color: "{{ s }}"])])
        #expect(encoder.encode(line("v", "#a3be8c"), now: now, redactor: .none) == "%{F#a3be8c}#a3be8c%{F-}\n")
        // A color name polybar cannot take is left out.
        #expect(encoder.encode(line("v", "red"), now: now, redactor: .none) == "red\n")
        #expect(encoder.encode(line("v", "#fff"), now: now, redactor: .none) == "%{F#fff}#fff%{F-}\n")
    }

    @Test func polybarDrawsATagInTheTextAsText() throws {
        var encoder = BarEncoder(format: .polybar, views: [try view("v", [.text: "{{ s }}", .color: "#f00"])])
        let text = "%{A1:rm -rf ~:}click%{A} 50% %%{F-} {F#fff}%"
        #expect(
            encoder.encode(line("v", .string(text)), now: now, redactor: .none)
                == "%{F#f00}%%{O0}{A1:rm -rf ~:}click%%{O0}{A} 50% %%%{O0}{F-} {F#fff}%%{F-}\n")
        var plain = BarEncoder(format: .polybar, views: [try view("v", [.text: "{{ s }}"])])
        #expect(plain.encode(line("v", "%{T2}"), now: now, redactor: .none) == "%%{O0}{T2}\n")
    }

    /// polybar reads bytes: `%{` followed by a combining mark, a variation selector or a zero-width joiner is
    /// still a tag to it, though Swift sees `{` and the mark as one character.
    @Test func polybarEscapesABraceThatAMarkFollows() throws {
        for mark in ["\u{301}", "\u{FE0F}", "\u{200D}", "\u{E0100}"] {
            var encoder = BarEncoder(format: .polybar, views: [try view("v", [.text: "{{ s }}"])])
            let content = "%{\(mark)A1:touch /tmp/owned:}click%{\(mark)A}"
            let encodedLine = encoder.encode(line("v", .string(content)), now: now, redactor: .none)
            let encoded = try #require(encodedLine)
            let expected = "%%{O0}{\(mark)A1:touch /tmp/owned:}click%%{O0}{\(mark)A}\n"
            #expect(Array(encoded.utf8) == Array(expected.utf8), "\(encoded.debugDescription)")
        }
    }

    /// NUL, ESC, BEL, DEL and C1 controls in content would reach the bar (a terminal for tmux) as they are.
    @Test func controlCharactersBecomeSpaces() throws {
        let content = "a\u{0}b\u{1B}[31mc\u{7}d\u{7F}e\u{9B}f\u{85}g\u{1B}\u{301}h"
        for format in [StdoutFormat.text, .polybar, .tmux] {
            var encoder = BarEncoder(format: format, views: [try view("v", [.text: "{{ s }}"])])
            let encodedLine = encoder.encode(line("v", .string(content)), now: now, redactor: .none)
            let encoded = try #require(encodedLine)
            #expect(Array(encoded.utf8) == Array("a b [31mc d e f g \u{301}h\n".utf8), "\(format): \(encoded.debugDescription)")
        }
        var i3bar = BarEncoder(format: .i3bar, views: [try view("v", [.text: "{{ s }}"])])
        let blocksLine = i3bar.encode(line("v", "x\u{1B}]0;title\u{7}y"), now: now, redactor: .none)
        let blocks = try #require(blocksLine)
        #expect(blocks.hasSuffix(#"[{"name":"v","full_text":"x ]0;title y","urgent":false}],"# + "\n"), "\(blocks)")
    }

    /// tmux reads `#[style]`, `#{format}` and `#(command)` in a `#()` command's output; `##` is a `#`.
    @Test func tmuxDoublesEveryHash() throws {
        var tmux = BarEncoder(format: .tmux, views: [try view("v", [.text: "# {{ s }}"]), try view("w")])
        #expect(tmux.encode(line("w", "#"), now: now, redactor: .none) == nil)
        let content = "#[fg=red]#{host}#(id)## #\u{301}{host}"
        let encodedLine = tmux.encode(line("v", .string(content)), now: now, redactor: .none)
        let encoded = try #require(encodedLine)
        #expect(Array(encoded.utf8) == Array("## ##[fg=red]##{host}##(id)#### ##\u{301}{host} | ##\n".utf8), "\(encoded)")
        // `text` is for consumers that read no markup: it stays as it is.
        var text = BarEncoder(format: .text, views: [try view("v", [.text: "{{ s }}"])])
        #expect(text.encode(line("v", .string(content)), now: now, redactor: .none) == content + "\n")
    }

    @Test func secretsAreRedactedInLiteralsAndValuesOnce() throws {
        var encoder = BarEncoder(format: .text, views: [try view("v", [.text: "token tok-1 {{ s }}"])])
        let redactor = Redactor(secrets: ["tok-1", "act"])
        // "act" is inside "[redacted]": the value's replacement must not be redacted again.
        #expect(encoder.encode(line("v", "tok-1 act"), now: now, redactor: redactor) == "token [redacted] [redacted] [redacted]\n")
    }

    @Test func selections() {
        #expect(StdoutFormat.json.checkSelection([]) == nil)
        #expect(StdoutFormat.json.checkSelection(["v"]) != nil)
        #expect(StdoutFormat.waybar.checkSelection(["v"]) == nil)
        #expect(StdoutFormat.waybar.checkSelection([]) != nil)
        #expect(StdoutFormat.waybar.checkSelection(["v", "w"]) != nil)
        #expect(StdoutFormat.text.checkSelection(["v", "w"]) == nil)
        #expect(StdoutFormat.polybar.checkSelection([]) != nil)
        #expect(StdoutFormat.tmux.checkSelection([]) != nil)
        #expect(StdoutFormat.tmux.checkSelection(["v", "w"]) == nil)
    }
}
