import HammockCore
import HammockJSON
import HammockRendering

/// A client's first line on `hammock serve`'s socket: what it reads, and how.
///
///     {"op":"subscribe","sources":["cpu"],"views":["bar"],"format":"json","id":1}
///
/// Absent `sources` and `views`: everything. `format` is one of `hammock run --format`'s but `tui` (a screen
/// is drawn by `hammock attach`, not the engine); a bar format shows `views`, in their order, as `--view`
/// does. `id` is answered with an `ack` once the snapshot is written, so a client knows when it has the
/// whole current state (`hammock get` exits there).
struct SubscribeRequest: Sendable, Equatable {
    var subscription: Subscription
    var format: StdoutFormat
    /// The views a bar format shows, in order.
    var views: [ViewID]
    var id: ControlID?

    static let op = "subscribe"

    /// What a client that says nothing reads: every line, as `hammock run` writes them.
    static let everything = SubscribeRequest(subscription: .everything, format: .json, views: [], id: nil)

    /// Whether `line` is a `subscribe` line (valid or not): a client's first line that is not one is a
    /// control line like any other.
    static func isSubscribe(_ line: some Collection<UInt8>) -> Bool {
        guard case .object(let fields)? = try? JSONValue(parsing: line) else { return false }
        return fields["op"] == .string(op)
    }

    /// Decodes a `subscribe` line; the error is the `error` line's message (with the line's `id`, when valid).
    init(line: some Collection<UInt8>) throws(ControlLineError) {
        guard case .object(let fields)? = try? JSONValue(parsing: line) else {
            throw ControlLineError("subscribe: not a JSON object")
        }
        var id: ControlID?
        if let given = fields["id"] {
            guard let valid = ControlID(given) else { throw ControlLineError("subscribe: \"id\" must be a string or a number") }
            id = valid
        }
        func names(_ key: String) throws(ControlLineError) -> [String]? {
            guard let value = fields[key] else { return nil }
            guard case .array(let items) = value, let names = Optional(items.compactMap(\.stringValue)), names.count == items.count
            else { throw ControlLineError("subscribe: \"\(key)\" must be an array of ids (strings)", id: id) }
            return names
        }
        let sources = try names("sources").map { $0.map { SourceID($0) } }
        let views = try names("views").map { $0.map { ViewID($0) } }
        var format = StdoutFormat.json
        if let given = fields["format"] {
            guard let text = given.stringValue, let known = StdoutFormat(rawValue: text), known != .tui else {
                let formats = StdoutFormat.allCases.filter { $0 != .tui }.map(\.rawValue).joined(separator: ", ")
                throw ControlLineError("subscribe: \"format\" must be one of \(formats)", id: id)
            }
            format = known
        }
        let known = Set(["op", "id", "sources", "views", "format"])
        if let unknown = fields.keys.first(where: { !known.contains($0) }) {
            throw ControlLineError("subscribe: unknown key \"\(unknown)\" (keys: op, id, sources, views, format)", id: id)
        }
        if format != .json, let problem = format.checkSelection(views ?? []) {
            throw ControlLineError("subscribe: " + problem.replacing("--view", with: "\"views\""), id: id)
        }
        let subscription: Subscription
        switch format {
        case .json, .tui:
            subscription = sources == nil && views == nil ? .everything : Subscription(sources: Set(sources ?? []), views: Set(views ?? []))
        case .waybar, .polybar, .text, .tmux, .i3bar:
            subscription = .reading(format, views: views ?? [])
        }
        self.init(subscription: subscription, format: format, views: views ?? [], id: id)
    }

    init(subscription: Subscription, format: StdoutFormat, views: [ViewID], id: ControlID?) {
        self.subscription = subscription
        self.format = format
        self.views = views
        self.id = id
    }
}
