/// 1-based line and column, as editors show them.
///
/// Columns count Unicode scalars (that is how libyaml counts), not bytes.
public struct YAMLMark: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var line: Int
    public var column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    public var description: String { "\(line):\(column)" }

    public static func < (lhs: YAMLMark, rhs: YAMLMark) -> Bool {
        (lhs.line, lhs.column) < (rhs.line, rhs.column)
    }
}

/// One node of a parsed document. Every node remembers where it starts so
/// that configuration errors found later can point at the offending text.
public struct YAMLNode: Sendable {
    public enum Kind: Sendable {
        case scalar(YAMLScalar)
        case sequence([YAMLNode])
        case mapping([YAMLPair])
    }

    public var kind: Kind
    /// Where the node starts. A node produced by an alias keeps the mark of
    /// the anchored node, not of the alias.
    public var mark: YAMLMark

    public init(kind: Kind, mark: YAMLMark) {
        self.kind = kind
        self.mark = mark
    }
}

public struct YAMLPair: Sendable {
    public var key: YAMLNode
    public var value: YAMLNode

    public init(key: YAMLNode, value: YAMLNode) {
        self.key = key
        self.value = value
    }
}

public struct YAMLScalar: Sendable, Hashable {
    public enum Style: Sendable, Hashable {
        case plain, singleQuoted, doubleQuoted, literal, folded
    }

    public var text: String
    public var style: Style
    /// Explicit tag as resolved by libyaml, e.g. "tag:yaml.org,2002:str" for `!!str`,
    /// or "!" for the non-specific tag. nil when no tag was written.
    public var tag: String?

    public init(text: String, style: Style, tag: String? = nil) {
        self.text = text
        self.style = style
        self.tag = tag
    }
}

public enum YAMLResolvedScalar: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    case float(Double)
    case string(String)
}

public struct YAMLError: Error, Sendable, CustomStringConvertible {
    public var mark: YAMLMark
    public var message: String

    public init(mark: YAMLMark, message: String) {
        self.mark = mark
        self.message = message
    }

    public var description: String { "\(mark): \(message)" }
}

extension YAMLNode {
    public var scalar: YAMLScalar? {
        if case .scalar(let scalar) = kind { return scalar }
        return nil
    }

    public var sequence: [YAMLNode]? {
        if case .sequence(let items) = kind { return items }
        return nil
    }

    public var mapping: [YAMLPair]? {
        if case .mapping(let pairs) = kind { return pairs }
        return nil
    }

    /// Human wording for error messages such as "expected a mapping, found a list".
    public var kindName: String {
        switch kind {
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        case .scalar(let scalar):
            switch scalar.resolved {
            case .null: return "null"
            case .bool: return "a boolean"
            case .int, .float: return "a number"
            case .string: return "a string"
            }
        }
    }
}
