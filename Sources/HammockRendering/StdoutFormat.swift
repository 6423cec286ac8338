import HammockCore
import HammockJSON

/// What `hammock run --format` writes on stdout. docs/formats.md.
public enum StdoutFormat: String, Sendable, CaseIterable {
    /// The protocol's JSON lines (docs/protocol.md).
    case json
    /// One JSON object per line for Waybar's `custom` module: `text`, `alt`, `tooltip`, `class`, `percentage`.
    case waybar
    /// One line of text per change, with `%{F#rrggbb}` color tags, for polybar's `custom/script` with `tail`.
    case polybar
    /// The rendered text, one line per change (conky, eww `deflisten`): the text as it is, for consumers that
    /// read no markup in it.
    case text
    /// The rendered text for tmux's `#()`, with every `#` doubled: tmux reads `#[style]`, `#{format}` and `#(command)`
    /// in a `#()` command's output, and `##` is its `#`.
    case tmux
    /// i3bar's protocol (also swaybar's): a header, then an endless JSON array with an array of blocks per
    /// change, one block per view; click events come on stdin.
    case i3bar
    /// `hammock watch`: a live screen of every source and view for a person at a terminal (`WatchScreen`).
    case tui

    /// What `--view` may select: `waybar` shows exactly one view, the text formats one or more, `i3bar` the
    /// views given or, with none, every view.
    public func checkSelection(_ views: [ViewID]) -> String? {
        switch self {
        case .json, .tui:
            return views.isEmpty ? nil : "--view applies to the bar formats (waybar, polybar, text, tmux, i3bar), not to \(rawValue)"
        case .waybar:
            return views.count == 1 ? nil : "--format waybar shows one view per process: give exactly one --view"
        case .polybar, .text, .tmux:
            return views.isEmpty ? "--format \(rawValue) needs at least one --view" : nil
        case .i3bar:
            return nil
        }
    }
}

/// Turns the engine's output lines into a status bar's lines: each `view` line of a selected view is
/// rendered (`ViewDefinition.render`), and a line is written only when what the bar would show changed.
/// Every other line (`hello`, `source`, `ack`, `bye`…) is the protocol's business and is dropped.
///
/// With several views (`polybar`, `text`, `tmux`), their texts are joined by `separator` in the order given, and
/// nothing is written until each has had a state (the engine states every view at start).
public struct BarEncoder: Sendable {
    public static let separator = " | "

    public let format: StdoutFormat
    /// The selected views, in the order their texts are joined.
    private var views: [ViewDefinition]
    /// Each selected view's latest state, kept to render again as time passes (`refresh`).
    private var states: [ViewID: ViewState] = [:]
    private var blocks: [ViewID: (status: ViewStatus, block: RenderedBlock)] = [:]
    private var lastLine: String?
    /// `i3bar`: the header and the array's `[` go before the first blocks.
    private var hasStarted = false
    /// Each view's render problems as last reported, by key (`text`, `tooltip`, …): a problem is reported
    /// when its wording changes, not at every render (a bar re-renders `ago` every second).
    private var reportedProblems: [ViewID: [String: String]] = [:]
    /// Problems to report, oldest first (`takeProblems`).
    private var unreportedProblems: [String] = []

    /// - Precondition: `format` is a bar's (not `json` nor `tui`), and `views` satisfies `format.checkSelection`.
    public init(format: StdoutFormat, views: [ViewDefinition]) {
        precondition(format != .json && format != .tui, "json and tui are not a bar's")
        self.format = format
        self.views = views
    }

    /// A reload's new definitions (templates) for the selected views; a selected view that the reload removed
    /// keeps its old definition and its last state.
    public mutating func update(_ definitions: [ViewDefinition]) {
        for index in views.indices {
            guard let new = definitions.first(where: { $0.id == views[index].id }) else { continue }
            if new != views[index] { reportedProblems[new.id] = nil }  // new templates: their problems are news
            views[index] = new
        }
    }

    /// The render problems found since the last call, each once per change of its wording, as lines for a
    /// log: `view "repo": text: {{ repo.forks }} has no value`.
    public mutating func takeProblems() -> [String] {
        defer { unreportedProblems.removeAll() }
        return unreportedProblems
    }

    /// How often `refresh` should run while `dependsOnTime`: `ago` counts whole seconds.
    public static let refreshInterval: Duration = .seconds(1)

    /// Whether what the bar shows changes with time alone (a template uses `ago`): then `refresh` must run
    /// every `refreshInterval`, though no state changes.
    public var dependsOnTime: Bool { views.contains { $0.render?.dependsOnTime == true } }

    /// The bar's line for `line`, `\n` included, or nil when it has nothing new to show.
    public mutating func encode(_ line: OutputLine, now: Timestamp, redactor: Redactor) -> String? {
        guard case .view(let id, let state) = line, let view = views.first(where: { $0.id == id }) else { return nil }
        states[id] = state
        render(view, state: state, now: now, redactor: redactor)
        return encodeIfChanged()
    }

    /// Every view rendered again at `now`: the bar's line when an `ago` changed what it shows, else nil.
    public mutating func refresh(now: Timestamp, redactor: Redactor) -> String? {
        for view in views {
            guard let state = states[view.id] else { continue }
            render(view, state: state, now: now, redactor: redactor)
        }
        return encodeIfChanged()
    }

    private mutating func render(_ view: ViewDefinition, state: ViewState, now: Timestamp, redactor: Redactor) {
        var rendered = view.render(state: state, now: now, redactor: redactor).redactingLiterals(with: redactor)
        if rendered.keepsText, let shown = blocks[view.id]?.block {
            // No content, and no text of the status's own: the bar goes on showing what it showed.
            rendered.text = shown.text
            rendered.short = shown.short
        }
        blocks[view.id] = (state.status, rendered)
        noteProblems(rendered.problems, of: view.id)
    }

    /// Queues the problems whose wording changed for their key since it was last reported. A key whose
    /// problem went away keeps its last wording: the same problem coming back is no news.
    private mutating func noteProblems(_ problems: [String], of view: ViewID) {
        guard !problems.isEmpty else { return }
        var byKey: [(key: String, wording: String)] = []
        for problem in problems {
            // Each reads `key: what`, the key being the render block's (`ViewDefinition.render`).
            let key = String(problem.prefix { $0 != ":" })
            if let index = byKey.firstIndex(where: { $0.key == key }) {
                byKey[index].wording += "; " + problem.dropFirst(key.count + 2)
            } else {
                byKey.append((key, problem))
            }
        }
        for (key, wording) in byKey where reportedProblems[view]?[key] != wording {
            reportedProblems[view, default: [:]][key] = wording
            unreportedProblems.append("view \"\(view)\": \(wording)")
        }
    }

    private mutating func encodeIfChanged() -> String? {
        guard views.allSatisfy({ blocks[$0.id] != nil }) else { return nil }
        let encoded = encodeSelection() + "\n"
        guard encoded != lastLine else { return nil }
        lastLine = encoded
        if format == .i3bar && !hasStarted {
            hasStarted = true
            return Self.i3barHeader + "\n[\n" + encoded
        }
        return encoded
    }

    private func encodeSelection() -> String {
        let selected = views.map { blocks[$0.id]! }
        switch format {
        case .waybar:
            return Self.waybar(selected[0].block, status: selected[0].status)
        case .polybar:
            return selected.map { Self.polybar($0.block) }.joined(separator: Self.separator)
        case .text, .json, .tui:
            return selected.map { Self.oneLine($0.block.text) }.joined(separator: Self.separator)
        case .tmux:
            return selected.map { Self.tmux($0.block) }.joined(separator: Self.separator)
        case .i3bar:
            return Self.i3bar(zip(views, selected).map { ($0.id.rawValue, $1.block) }) + ","
        }
    }

    /// The signals i3bar sends to hide and show the bar. i3bar signals the whole process group, plugins
    /// included, so both must be harmless to a process that does not catch them: SIGURG is ignored by
    /// default, and SIGCONT only continues (i3bar's default, SIGSTOP, would freeze hammock and its plugins).
    /// Linux's numbers (HammockCore does no system calls); a test checks them against Glibc's.
    public static let i3barStopSignal: Int32 = 23  // SIGURG
    public static let i3barContSignal: Int32 = 18  // SIGCONT

    /// The first line: protocol version 1, with clicks on stdin and the pair of signals hammock catches.
    public static var i3barHeader: String {
        var object = JSONObject()
        object["version"] = .number(JSONNumber(1))
        object["click_events"] = .bool(true)
        object["stop_signal"] = .number(JSONNumber(Int(i3barStopSignal)))
        object["cont_signal"] = .number(JSONNumber(Int(i3barContSignal)))
        return JSONValue.object(object).jsonString
    }

    /// One array of blocks: `name` is the view's id; `short_text` when the view renders one; `color` only
    /// when i3bar can read it (`#rrggbb`, `#rrggbbaa`); `urgent` as rendered.
    static func i3bar(_ blocks: [(name: String, block: RenderedBlock)]) -> String {
        let objects = blocks.map { name, block -> JSONValue in
            var object = JSONObject()
            object["name"] = .string(name)
            object["full_text"] = .string(oneLine(block.text))
            if let short = block.short { object["short_text"] = .string(oneLine(short)) }
            if let color = block.color, isHexColor(color), color.count != 4 { object["color"] = .string(color) }
            object["urgent"] = .bool(block.urgent)
            return .object(object)
        }
        return JSONValue.array(objects).jsonString
    }

    /// Waybar's `return-type: json`: `alt` is the view's status (for `format-icons`), `class` the rendered
    /// class, with `urgent` added while the block is urgent.
    static func waybar(_ block: RenderedBlock, status: ViewStatus) -> String {
        var object = JSONObject()
        object["text"] = .string(block.text)
        object["alt"] = .string(status.rawValue)
        object["tooltip"] = .string(block.tooltip ?? "")
        object["class"] = block.urgent ? .array([.string(block.class), .string("urgent")]) : .string(block.class)
        if let percentage = block.percentage { object["percentage"] = .number(JSONNumber(percentage)) }
        return JSONValue.object(object).jsonString
    }

    /// The text on one line, in the block's color when it has one polybar can show (`#rgb`, `#rrggbb`,
    /// `#aarrggbb`); a color name is left out.
    ///
    /// polybar reads every `%{` as a tag, and a content value may hold one: a color, or an `A` action that runs
    /// a command when the bar is clicked. polybar has no escape for it (`%%` is not one), so an offset of zero
    /// pixels, `%{O0}`, goes between the `%` and the `{`: both are drawn as they are, and nothing moves.
    ///
    /// polybar reads bytes, not characters: a `{` that a combining mark, a variation selector or a zero-width
    /// joiner follows is one Swift `Character` with it, yet still a tag's brace to polybar. So the text is
    /// escaped scalar by scalar, never by grapheme.
    static func polybar(_ block: RenderedBlock) -> String {
        var text = String.UnicodeScalarView()
        var previous: Unicode.Scalar?
        for scalar in oneLine(block.text).unicodeScalars {
            if previous == "%" && scalar == "{" { text.append(contentsOf: "%{O0}".unicodeScalars) }
            text.append(scalar)
            previous = scalar
        }
        guard let color = block.color, isHexColor(color) else { return String(text) }
        return "%{F\(color)}\(String(text))%{F-}"
    }

    /// The text on one line with every `#` doubled, so that tmux shows `#[fg=red]`, `#{host}` or `#(cmd)` from
    /// a content value as they are, instead of restyling the status line, expanding a format (`#{host}`
    /// shows the host's name) or dropping the text. Scalar by scalar, as polybar's escape: a `#` never hides
    /// inside a grapheme.
    static func tmux(_ block: RenderedBlock) -> String {
        var text = String.UnicodeScalarView()
        for scalar in oneLine(block.text).unicodeScalars {
            if scalar == "#" { text.append("#") }
            text.append(scalar)
        }
        return String(text)
    }

    /// A line per change: line breaks inside the text become spaces, and so do control characters (NUL, ESC,
    /// BEL, DEL, C1), which a terminal or a bar would act on (tmux and a terminal read ESC as the start of a
    /// sequence; NUL ends a C string) rather than show.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 }).controlCharactersAsSpaces
    }

    static func isHexColor(_ color: String) -> Bool {
        guard color.first == "#" else { return false }
        let digits = color.dropFirst()
        return [3, 6, 8].contains(digits.count) && digits.allSatisfy(\.isHexDigit)
    }
}

extension RenderedBlock {
    /// `render` redacts the values a template reads, not the text the template writes around them: the
    /// finished strings are redacted once more, leaving the `[redacted]` already there alone (a short secret
    /// could be found inside it).
    func redactingLiterals(with redactor: Redactor) -> RenderedBlock {
        guard !redactor.isEmpty else { return self }
        var block = self
        block.text = redactor.redactAround(text)
        block.short = short.map(redactor.redactAround)
        block.tooltip = tooltip.map(redactor.redactAround)
        block.class = redactor.redactAround(self.class)
        block.color = color.map(redactor.redactAround)
        return block
    }
}

extension Redactor {
    /// `text` redacted between the `[redacted]` it holds already.
    public func redactAround(_ text: String) -> String {
        guard !isEmpty else { return text }
        var result = ""
        var rest = text[...]
        while let range = rest.firstRange(of: Self.replacement) {
            result += redact(String(rest[..<range.lowerBound])) + Self.replacement
            rest = rest[range.upperBound...]
        }
        return result + redact(String(rest))
    }
}
