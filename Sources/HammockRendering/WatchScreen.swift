import HammockCore
import HammockJSON

/// `hammock watch`'s screen as a value: the latest state of every source and view, which row is selected,
/// and the lines to draw for a terminal of a given size. No I/O: the terminal edge (HammockEngine's
/// `WatchTerminal`) feeds it the engine's output lines and keys, and writes what `lines` returns.
///
/// Sources come first, in the configuration's order, then views; each row reads
/// `▸ ● id  age  ×failures  error or preview`. docs/formats.md, "hammock watch".
public struct WatchScreen: Sendable {
    /// A row: a source or a view, by id.
    public enum Row: Sendable, Hashable {
        case source(SourceID)
        case view(ViewID)

        /// The row's name as drawn.
        public var id: String {
            switch self {
            case .source(let id): id.rawValue
            case .view(let id): id.rawValue
            }
        }

        /// What `r` and `l` act on: the source, or the view's sources.
        public var target: ControlTarget {
            switch self {
            case .source(let id): .source(id)
            case .view(let id): .view(id)
            }
        }
    }

    /// How the terminal can show things.
    public struct Style: Sendable, Equatable {
        /// ANSI colors and reverse video for the selection.
        public var colors: Bool
        /// `●`, `✗`, `…`; else ASCII marks for a terminal whose locale is not UTF-8.
        public var unicode: Bool

        public init(colors: Bool, unicode: Bool = true) {
            self.colors = colors
            self.unicode = unicode
        }
    }

    /// The configuration's name for the header (its file name).
    public var title: String
    public private(set) var sourceIDs: [SourceID]
    public private(set) var views: [ViewDefinition]
    private var sourceStates: [SourceID: SourceState] = [:]
    private var viewStates: [ViewID: ViewState] = [:]
    /// The selected row, kept on the same id when rows come and go; `nil` only while there is no row.
    public private(set) var selected: Row?
    /// The first row shown when there are more rows than lines.
    private var scroll = 0

    public init(title: String, sources: [SourceID], views: [ViewDefinition]) {
        self.title = title
        self.sourceIDs = sources
        self.views = views
        selected = rows.first
    }

    public var rows: [Row] { sourceIDs.map(Row.source) + views.map { Row.view($0.id) } }

    /// Takes the newest state of a source or view from an engine line; other lines change nothing but the
    /// ids (`hello`, `reloaded`, `removed`).
    public mutating func apply(_ line: OutputLine) {
        switch line {
        case .source(let id, _, let state):
            sourceStates[id] = state
        case .view(let id, let state):
            viewStates[id] = state
        case .hello(let sources, _, _, _), .reloaded(let sources, _):
            sourceIDs = sources
            keepSelection()
        case .removed(let id, let what):
            // `what` says which kind of name the line's `id` is.
            if what == "source" {
                let id = SourceID(id)
                sourceStates[id] = nil
                sourceIDs.removeAll { $0 == id }
            } else {
                let id = ViewID(id)
                viewStates[id] = nil
                views.removeAll { $0.id == id }
            }
            keepSelection()
        case .ack, .error, .bye:
            break
        }
    }

    /// A reload's view definitions: the rows and the templates of views from now on.
    public mutating func update(views definitions: [ViewDefinition]) {
        views = definitions
        for id in viewStates.keys where !definitions.contains(where: { $0.id == id }) { viewStates[id] = nil }
        keepSelection()
    }

    /// Moves the selection `by` rows down (up when negative), stopping at the first and last rows.
    public mutating func move(by offset: Int) {
        let all = rows
        guard !all.isEmpty else { return }
        let index = selected.flatMap { all.firstIndex(of: $0) } ?? 0
        selected = all[min(max(index + offset, 0), all.count - 1)]
    }

    private mutating func keepSelection() {
        if let selected, rows.contains(selected) { return }
        selected = rows.first
    }

    /// The screen, at most `height` lines of at most `width` display columns each: a header, the rows (the
    /// selected one always among those shown), and the keys.
    public mutating func lines(
        width: Int, height: Int, now: Timestamp, style: Style, redactor: Redactor = .none
    ) -> [String] {
        let width = max(width, 1)
        let all = rows
        let marks = Marks(unicode: style.unicode)
        let failing = all.filter { status(of: $0) == .error }.count
        let dot = style.unicode ? " · " : " - "
        var header = "hammock watch\(dot)\(sanitized(title))\(dot)\(sourceIDs.count) source\(sourceIDs.count == 1 ? "" : "s"), "
            + "\(views.count) view\(views.count == 1 ? "" : "s")"
        if failing > 0 { header += "\(dot)\(failing) failing" }
        let footer = style.unicode ? "↑/↓ j/k move · r retry · l load · q quit" : "up/down j/k move, r retry, l load, q quit"

        // Header and footer take a line each when there is room for a row besides.
        let framed = height >= 3
        let room = max(framed ? height - 2 : height, 0)
        let selectedIndex = selected.flatMap { all.firstIndex(of: $0) } ?? 0
        if selectedIndex < scroll { scroll = selectedIndex }
        if selectedIndex >= scroll + room { scroll = selectedIndex - room + 1 }
        scroll = max(0, min(scroll, max(all.count - room, 0)))
        let idWidth = min(all.map { displayWidth(of: $0.id) }.max() ?? 0, max(width / 4, 8))

        var result: [String] = []
        if framed { result.append(paint(fit(header, width: width, marks: marks), .bold, style)) }
        for row in all.dropFirst(scroll).prefix(room) {
            result.append(line(for: row, width: width, idWidth: idWidth, now: now, style: style, marks: marks, redactor: redactor))
        }
        if framed {
            while result.count < height - 1 { result.append("") }
            result.append(paint(fit(footer, width: width, marks: marks), .dim, style))
        }
        return result
    }

    private func status(of row: Row) -> WatchStatus {
        switch row {
        case .source(let id):
            guard let state = sourceStates[id] else { return .idle }
            if state.isLoading { return .loading }
            if state.latestError != nil { return .error }
            return state.hasContent ? .data : .idle
        case .view(let id):
            switch viewStates[id]?.status {
            case .data: return .data
            case .loading: return .loading
            case .error: return .error
            case .idle, nil: return .idle
            }
        }
    }

    private func line(
        for row: Row, width: Int, idWidth: Int, now: Timestamp, style: Style, marks: Marks, redactor: Redactor
    ) -> String {
        let isSelected = row == selected
        let status = status(of: row)
        let (age, failures, detail) = columns(of: row, now: now, redactor: redactor)
        let idText = fit(sanitized(redactor.redact(row.id)), width: idWidth, marks: marks)
        let pointer = isSelected ? marks.pointer : " "
        var plain = "\(pointer) \(marks.mark(status)) " + padded(idText, to: idWidth) + "  " + padded(age, to: 10)
        plain += "  " + padded(failures > 0 ? "\(marks.times)\(failures)" : "", to: 4)
        plain += "  " + sanitized(detail)
        let text = fit(plain, width: width, marks: marks)
        guard style.colors else { return text }
        // The mark is the third column: color it alone, then the whole line reversed when selected.
        let prefixEnd = text.index(text.startIndex, offsetBy: min(3, text.count))
        let markStart = text.index(text.startIndex, offsetBy: min(2, text.count))
        let colored = String(text[..<markStart]) + paint(String(text[markStart..<prefixEnd]), status.color, style)
            + String(text[prefixEnd...])
        return isSelected ? "\u{1B}[7m" + colored.replacingResets(with: "\u{1B}[0;7m") + "\u{1B}[0m" : colored
    }

    /// The age of the data, the consecutive failures and the text after them: the error's first line, and
    /// the content's preview.
    private func columns(of row: Row, now: Timestamp, redactor: Redactor) -> (String, Int, String) {
        switch row {
        case .source(let id):
            guard let state = sourceStates[id] else { return ("–", 0, "waiting for the first state") }
            let age = state.timestamp.map { agoText(now - $0) } ?? "never"
            var parts: [String] = []
            if let error = state.latestError { parts.append("error: " + firstLine(redactor.redact(error.message))) }
            if let content = state.content { parts.append(shortForm(redactor.redact(content))) }
            if parts.isEmpty { parts.append(state.isLoading ? "loading" : "no data") }
            return (age, state.failures, parts.joined(separator: " · "))
        case .view(let id):
            guard let definition = views.first(where: { $0.id == id }), let state = viewStates[id] else {
                return ("–", 0, "waiting for the first state")
            }
            // A view's data is as old as its oldest source's.
            let stamps = definition.sources.compactMap { sourceStates[$0]?.timestamp }
            let age = stamps.min().map { agoText(now - $0) } ?? "never"
            let failures = definition.sources.compactMap { sourceStates[$0]?.failures }.max() ?? 0
            let block = definition.render(state: state, now: now, redactor: redactor).redactingLiterals(with: redactor)
            var parts: [String] = []
            if block.keepsText {
                // No content, and no text of the status's own: what the view shows without `render:` says
                // more to a person than the empty text a bar gets.
                var plain = definition
                plain.render = nil
                parts.append(firstLine(plain.render(state: state, now: now, redactor: redactor).text))
            } else {
                parts.append(firstLine(block.text))
            }
            // Render problems show beside the text (a template with a hole renders its expression as "").
            if !block.problems.isEmpty { parts.append("problem: " + block.problems.joined(separator: "; ")) }
            return (age, failures, parts.filter { !$0.isEmpty }.joined(separator: " · "))
        }
    }

    private func firstLine(_ text: String) -> String {
        String(text.split(whereSeparator: \.isNewline).first ?? "")
    }

    private func padded(_ text: String, to columns: Int) -> String {
        text + String(repeating: " ", count: max(columns - displayWidth(of: text), 0))
    }
}

/// A row's status, as its mark shows it.
private enum WatchStatus {
    case data, loading, error, idle

    var color: SGR {
        switch self {
        case .data: .green
        case .loading: .yellow
        case .error: .red
        case .idle: .dim
        }
    }
}

/// The marks, in Unicode or in ASCII.
private struct Marks {
    var unicode: Bool

    var pointer: String { unicode ? "▸" : ">" }
    var times: String { unicode ? "×" : "x" }
    var ellipsis: String { unicode ? "…" : "~" }

    func mark(_ status: WatchStatus) -> String {
        switch status {
        case .data: unicode ? "●" : "*"
        case .loading: unicode ? "◌" : "~"
        case .error: unicode ? "✗" : "x"
        case .idle: unicode ? "·" : "."
        }
    }
}

/// The few ANSI attributes the screen uses.
private enum SGR: String {
    case bold = "1", dim = "2", red = "31", green = "32", yellow = "33"
}

private func paint(_ text: String, _ attribute: SGR, _ style: WatchScreen.Style) -> String {
    guard style.colors, !text.isEmpty else { return text }
    return "\u{1B}[\(attribute.rawValue)m" + text + "\u{1B}[0m"
}

extension String {
    /// Every reset inside the text replaced, so that an attribute around it (reverse video) holds to its end.
    fileprivate func replacingResets(with replacement: String) -> String {
        replacing("\u{1B}[0m", with: replacement)
    }
}

/// Text from a source or a server, made safe to draw: control characters (an escape sequence could move the
/// cursor or recolor the terminal; a line break would break the row) become spaces.
private func sanitized(_ text: String) -> String { text.controlCharactersAsSpaces }

/// `text` cut to `width` display columns, ending with an ellipsis when cut.
private func fit(_ text: String, width: Int, marks: Marks) -> String {
    guard displayWidth(of: text) > width else { return text }
    guard width > 0 else { return "" }
    var result = ""
    var used = 0
    for character in text {
        let columns = displayWidth(of: character)
        if used + columns > width - 1 { break }
        result.append(character)
        used += columns
    }
    return result + marks.ellipsis
}

/// How many columns a terminal gives the text: two for East Asian wide characters and most emoji, none for
/// a mark that combines with the character before it, one otherwise.
func displayWidth(of text: String) -> Int {
    text.reduce(0) { $0 + displayWidth(of: $1) }
}

func displayWidth(of character: Character) -> Int {
    guard let scalar = character.unicodeScalars.first else { return 0 }
    switch scalar.properties.generalCategory {
    case .nonspacingMark, .enclosingMark, .format: return 0
    default: break
    }
    if scalar.properties.isEmojiPresentation { return 2 }
    switch scalar.value {
    case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
        0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
        return 2
    default:
        return 1
    }
}

/// When `hammock watch` draws a frame: at once for the first, then at most one frame per
/// `minimumFrameInterval` (10 a second) however fast states change, and one a second with no change, so
/// that ages move. The terminal edge asks it with the monotonic clock; tests pass the time by hand.
public struct FrameThrottle: Sendable {
    public static let minimumFrameInterval: Duration = .milliseconds(100)
    public static let ageRefreshInterval: Duration = .seconds(1)

    public private(set) var lastFrame: MonotonicInstant?

    public init() {}

    /// When the next frame is due, `dirty` saying whether anything changed since the last.
    public func nextFrame(dirty: Bool, now: MonotonicInstant) -> MonotonicInstant {
        lastFrame.map { $0 + (dirty ? Self.minimumFrameInterval : Self.ageRefreshInterval) } ?? now
    }

    public mutating func drew(at instant: MonotonicInstant) { lastFrame = instant }
}
