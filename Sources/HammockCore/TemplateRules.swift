import HammockJSON

/// What a kind's plugin declares, in its `hello`, about `{{ }}` templates in its sources' options: which
/// options may hold none (a value could change what the option means, like a shell script's text), and
/// which are URLs whose values are percent-encoded. No rules: every option may hold templates, none encoded.
public struct TemplateRules: Sendable, Hashable {
    /// Options that may hold no template, each with the plugin's reason; a pointer covers everything under it.
    public var refused: [JSONPointer: String]
    /// Options whose template values are percent-encoded (see `Template.render`): exactly these pointers.
    public var urlEncoded: Set<JSONPointer>

    public init(refused: [JSONPointer: String] = [:], urlEncoded: Set<JSONPointer> = []) {
        self.refused = refused
        self.urlEncoded = urlEncoded
    }

    public var isEmpty: Bool { refused.isEmpty && urlEncoded.isEmpty }

    /// `definition`'s templates judged by the rules: a problem at each template a rule refuses, and the
    /// definition with each template's `percentEncode` as the rules say.
    public func apply(to definition: SourceDefinition) -> (definition: SourceDefinition, problems: [OptionProblem]) {
        var definition = definition
        var problems: [OptionProblem] = []
        for index in definition.templates.indices {
            let pointer = definition.templates[index].pointer
            if let reason = refusal(at: pointer) {
                problems.append(OptionProblem(pointer: pointer, message: reason))
            }
            definition.templates[index].percentEncode = urlEncoded.contains(pointer)
        }
        return (definition, problems)
    }

    /// The reason of the refused pointer that `pointer` is at or under; the shortest one when several are,
    /// so the answer does not depend on the dictionary's order.
    private func refusal(at pointer: JSONPointer) -> String? {
        refused.filter { pointer.tokens.starts(with: $0.key.tokens) }
            .min { ($0.key.tokens.count, $0.key.description) < ($1.key.tokens.count, $1.key.description) }?.value
    }
}
