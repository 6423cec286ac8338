import HammockJSON
import OrderedCollections

/// A view's `render:` block: how a status bar shows it. docs/configuration.md, "Rendering a view".
public struct ViewRender: Sendable, Hashable {
    public enum Field: String, Sendable, Hashable, CaseIterable {
        case text, short, tooltip, `class`, percentage, color, urgent
    }

    /// The statuses that may have keys of their own (`loading:`, `error:`, `idle:`); the top-level keys are
    /// the `data` ones.
    public static let overridableStatuses: [ViewStatus] = [.loading, .error, .idle]

    /// The names a template may start with besides a view's source ids (HammockRendering's `RenderContext`
    /// fills them in); they win over a source of the same name, which `content.NAME` still reaches.
    public static let reservedNames = ["content", "status", "latestError", "errors", "canTryAgain"]

    /// The top-level keys.
    public var templates: [Field: RenderTemplate]
    /// Keys that replace the top-level ones while the view is in that status.
    public var overrides: [ViewStatus: [Field: RenderTemplate]]

    public init(templates: [Field: RenderTemplate] = [:], overrides: [ViewStatus: [Field: RenderTemplate]] = [:]) {
        self.templates = templates
        self.overrides = overrides
    }

    /// Whether some template renders differently as time passes (`ago`), so a bar must render it again.
    public var dependsOnTime: Bool {
        (templates.values.contains(where: \.dependsOnTime))
            || overrides.values.contains { $0.values.contains(where: \.dependsOnTime) }
    }

    /// The templates in force in `status`: its own keys over the top-level ones.
    public func templates(for status: ViewStatus) -> [Field: RenderTemplate] {
        templates.merging(overrides[status] ?? [:]) { _, override in override }
    }
}
