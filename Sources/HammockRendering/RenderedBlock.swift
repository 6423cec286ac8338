import HammockCore
import HammockJSON
import OrderedCollections

/// A view as a status bar shows it; every output format takes what it needs from here.
public struct RenderedBlock: Sendable, Equatable {
    public var text: String
    /// What a narrow bar shows instead of `text` (i3bar's `short_text`); `nil` leaves it to the bar.
    public var short: String?
    public var tooltip: String?
    public var `class`: String
    /// 0–100.
    public var percentage: Int?
    /// As the configuration wrote it (`#ff0000`, a name): formats check what they can carry.
    public var color: String?
    public var urgent: Bool
    /// What went wrong while rendering (`text: {{ load.x }} has no value`): each such expression rendered as
    /// "". For a log (`BarEncoder.takeProblems`) and `hammock watch`'s row, not for the bar.
    public var problems: [String]
    /// The view has no content and its status no `text` of its own, so its `text` template is not rendered
    /// over nothing: `text` is empty, and a bar keeps the text (and `short`) it showed last, if any.
    public var keepsText: Bool

    public init(
        text: String, short: String? = nil, tooltip: String? = nil, class: String, percentage: Int? = nil,
        color: String? = nil, urgent: Bool = false, problems: [String] = [], keepsText: Bool = false
    ) {
        self.text = text
        self.short = short
        self.tooltip = tooltip
        self.class = `class`
        self.percentage = percentage
        self.color = color
        self.urgent = urgent
        self.problems = problems
        self.keepsText = keepsText
    }
}

extension ViewDefinition {
    /// The view rendered for a status bar: its `render:` templates in force for the state's status, and the
    /// default for every key they leave out (`defaultBlock`). Values are redacted before any filter sees them.
    ///
    /// While the view has no content, the top-level keys (the `data` ones) are not rendered: over nothing
    /// they show their holes (`forks  stars `). Only the status's own keys (`loading:`, `error:`, `idle:`)
    /// are; the others take their defaults, but `text`, which is left empty for the bar to keep what it
    /// showed last (`keepsText`).
    public func render(state: ViewState, now: Timestamp, redactor: Redactor = .none) -> RenderedBlock {
        let context = RenderContext(view: self, state: state, now: now, redactor: redactor)
        var block = defaultBlock(state: state, context: context)
        guard let render else { return block }
        let hasContent = state.content != .null
        let templates = hasContent ? render.templates(for: state.status) : render.overrides[state.status] ?? [:]
        if !hasContent && templates[.text] == nil && render.templates[.text] != nil {
            block.text = ""
            block.keepsText = true
        }
        func rendered(_ field: ViewRender.Field) -> String? {
            guard let template = templates[field] else { return nil }
            let (text, problems) = template.render(in: context)
            block.problems += problems.map { "\(field.rawValue): \($0)" }
            return text
        }
        if let text = rendered(.text) { block.text = text }
        if let short = rendered(.short) { block.short = short.isEmpty ? nil : short }
        if let tooltip = rendered(.tooltip) { block.tooltip = tooltip.isEmpty ? nil : tooltip }
        if let name = rendered(.class), !name.isEmpty { block.class = name }
        if let color = rendered(.color) { block.color = color.isEmpty ? nil : color }
        if let urgent = rendered(.urgent) { block.urgent = isTrue(urgent) }
        if let percentage = rendered(.percentage) {
            let trimmed = percentage.filter { !$0.isWhitespace }
            if trimmed.isEmpty {
                block.percentage = nil
            } else if let number = JSONValue.string(trimmed).renderNumber {
                block.percentage = Int(min(100, max(0, number)).rounded(.toNearestOrAwayFromZero))
            } else {
                block.percentage = nil
                block.problems.append("percentage: \"\(percentage)\" is not a number")
            }
        }
        return block
    }

    /// Without `render:` (or for a key it leaves out): the class is the status; the text is the content in
    /// short (`data`), `loading` (with the content in short once there is some: `loading: 0.52`),
    /// `error: ` and the first line of the latest error's message, or `idle`; the tooltip is the whole
    /// message in `error`.
    func defaultBlock(state: ViewState, context: RenderContext) -> RenderedBlock {
        // From the view's content, not the template names: a source may be called `status` or `content`,
        // names a template reserves for the view's own.
        let content = sources.compactMap { source in context.roots["content"]?[source.rawValue].map(shortForm) }
            .filter { !$0.isEmpty }.joined(separator: " · ")
        let message = context.roots["latestError"]?["message"]?.stringValue
        let text: String
        var tooltip: String?
        switch state.status {
        case .data: text = content.isEmpty ? "–" : content
        case .loading: text = content.isEmpty ? "loading" : "loading: \(content)"
        case .idle: text = "idle"
        case .error:
            text = message.map { "error: " + shortForm(.string($0)) } ?? "error"
            tooltip = message
        }
        return RenderedBlock(text: text, tooltip: tooltip, class: state.status.rawValue)
    }
}

/// A source's content in at most 40 characters on one line: text's first line, a number or boolean as it is,
/// `[3 items]` for an array, compact JSON for an object.
func shortForm(_ value: JSONValue) -> String {
    let text: String
    switch value {
    case .string(let string):
        text = String(string.split(whereSeparator: \.isNewline).first { !$0.allSatisfy(\.isWhitespace) } ?? "")
            .trimmingWhitespace()
    case .array(let items): text = items.count == 1 ? "[1 item]" : "[\(items.count) items]"
    default: text = value.renderText
    }
    return text.count > 40 ? String(text.prefix(39)) + "…" : text
}

/// `urgent:` renders to text; these words (any case, white space around them ignored) and "" are false,
/// anything else is true, so `urgent: "{{ latestError }}"` is urgent while there is an error.
private func isTrue(_ text: String) -> Bool {
    !["", "false", "no", "0", "null"].contains(text.trimmingWhitespace().lowercased())
}
