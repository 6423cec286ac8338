import HammockJSON

/// A click on a block, as i3bar (and swaybar) write them on hammock's stdin with `click_events`: a `[` line,
/// then an object per click, each after the first preceded by a comma. docs/formats.md, "i3bar".
public struct BarClick: Sendable, Equatable {
    /// The block's `name`: the view's id.
    public var view: ViewID
    /// 1 left, 2 middle, 3 right, 4 and 5 the wheel.
    public var button: Int

    public init(view: ViewID, button: Int) {
        self.view = view
        self.button = button
    }

    /// What one line of i3bar's click stream holds.
    public enum Line: Sendable, Equatable {
        case click(BarClick)
        /// The array's `[`, or a blank line.
        case framing
        case invalid(String)
    }

    public static func parse(_ bytes: some Collection<UInt8>) -> Line {
        var text = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        if text.hasPrefix(",") { text = String(text.dropFirst()).trimmingWhitespace() }
        if text.isEmpty || text == "[" || text == "]" { return .framing }
        guard let value = try? JSONValue(parsing: text), case .object(let object) = value else {
            return .invalid("not a click event (a JSON object): \(text.prefix(200))")
        }
        guard let name = object["name"]?.stringValue else {
            return .invalid("a click event without a \"name\": \(text.prefix(200))")
        }
        let button = object["button"]?.numberValue?.intValue ?? 1
        // i3bar's `name` is the text we gave the block: the view's id.
        return .click(BarClick(view: ViewID(name), button: button))
    }
}

/// What a click on a view's block does: a view's `on-click:` (docs/configuration.md, "Clicks").
public enum ClickAction: Sendable, Hashable {
    /// The control op of that name on the view: `load`, `retry` or `loadIfNeeded`.
    case load, retry, loadIfNeeded
    /// `/bin/sh -c COMMAND`, with `HAMMOCK_VIEW` and `HAMMOCK_BUTTON` set; its output goes to the log.
    case run(String)

    /// The words `on-click:` takes for the ops.
    public static let operations: [String: ClickAction] = ["load": .load, "retry": .retry, "loadIfNeeded": .loadIfNeeded]

    /// i3bar's numbers for the buttons `on-click:` may name; a number from 1 to 9 is taken too.
    public static let buttons: KeyValuePairs<String, Int> = [
        "left": 1, "middle": 2, "right": 3, "scroll-up": 4, "scroll-down": 5, "back": 8, "forward": 9,
    ]
}

/// An `on-click` command to run, which the engine starts (`EngineAction.runClickCommand`).
public struct ClickCommand: Sendable, Equatable {
    public var command: String
    public var view: ViewID
    public var button: Int

    public init(command: String, view: ViewID, button: Int) {
        self.command = command
        self.view = view
        self.button = button
    }
}
