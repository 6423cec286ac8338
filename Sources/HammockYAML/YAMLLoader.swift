import CYAML

public enum YAML {
    /// Parses exactly one document. Returns nil for an empty stream (empty file or only comments).
    public static func parse(_ text: String) throws(YAMLError) -> YAMLNode? {
        // libyaml keeps a pointer to the input for the whole parse, so the bytes
        // must live in one contiguous buffer we own. The trailing NUL is never
        // read (the length excludes it); it only guarantees a non-nil base
        // address for the empty input, which libyaml asserts on.
        var bytes = Array(text.utf8)
        let length = bytes.count
        bytes.append(0)

        // yaml_parser_set_input_string stores a pointer to the parser inside the
        // parser itself, so the parser needs a stable address rather than an
        // inout-bridged local.
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) != 0 else {
            throw YAMLError(mark: YAMLMark(line: 1, column: 1), message: "out of memory while creating the YAML parser")
        }
        defer { yaml_parser_delete(parser) }

        return try bytes.withUnsafeBufferPointer { (buffer) throws(YAMLError) -> YAMLNode? in
            yaml_parser_set_input_string(parser, buffer.baseAddress!, length)
            // libyaml puts what it finds at the end of a text without a final line break (the null after
            // a lone `---`, say) on the line after the last; node marks are clamped like error marks.
            var builder = TreeBuilder(end: YAMLMark(byteOffset: length, in: UnsafeBufferPointer(rebasing: buffer[..<length])))
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(parser, &event) != 0 else {
                    throw libyamlError(parser.pointee, input: UnsafeBufferPointer(rebasing: buffer[..<length]))
                }
                defer { yaml_event_delete(&event) }
                if event.type == YAML_STREAM_END_EVENT {
                    return builder.root
                }
                try builder.handle(event)
            }
        }
    }

    private static func libyamlError(_ parser: yaml_parser_t, input: UnsafeBufferPointer<UInt8>) -> YAMLError {
        // At end of stream libyaml reports the line after the last one when the
        // text lacks a final newline; clamp so marks always point into the text.
        let end = YAMLMark(byteOffset: input.count, in: input)
        let mark: YAMLMark
        if parser.error == YAML_READER_ERROR {
            // Reader errors (bad encoding, control characters) only carry a byte offset.
            mark = YAMLMark(byteOffset: parser.problem_offset, in: input)
        } else {
            mark = min(YAMLMark(parser.problem_mark), end)
        }

        var message = parser.problem.map { String(cString: $0) } ?? "invalid YAML"
        if parser.error == YAML_READER_ERROR, parser.problem_value >= 0 {
            message += " (byte 0x\(String(parser.problem_value, radix: 16)))"
        }
        if let context = parser.context {
            let contextMark = min(YAMLMark(parser.context_mark), end)
            message += contextMark == mark
                ? " (\(String(cString: context)))"
                : " (\(String(cString: context)) started at \(contextMark))"
        }
        if byte(at: mark, in: input) == UInt8(ascii: "\t") {
            // By far the most common cause; libyaml's wording does not say so.
            message += "; YAML does not allow tabs for indentation"
        }
        return YAMLError(mark: mark, message: message)
    }

    private static func byte(at mark: YAMLMark, in input: UnsafeBufferPointer<UInt8>) -> UInt8? {
        var current = YAMLMark(line: 1, column: 1)
        for byte in input where byte & 0xC0 != 0x80 {
            if current == mark { return byte }
            if byte == UInt8(ascii: "\n") {
                current.line += 1
                current.column = 1
            } else {
                current.column += 1
            }
        }
        return nil
    }
}

extension YAMLMark {
    init(_ mark: yaml_mark_t) {
        self.init(line: Int(mark.line) + 1, column: Int(mark.column) + 1)
    }

    /// Counts columns in Unicode scalars and lines at every break libyaml knows (LF, CR, CRLF, NEL, LS,
    /// PS), to agree with the marks libyaml reports.
    init(byteOffset: Int, in input: UnsafeBufferPointer<UInt8>) {
        var line = 1
        var column = 1
        var index = 0
        let end = min(byteOffset, input.count)
        while index < end {
            let byte = input[index]
            let next = index + 1 < input.count ? input[index + 1] : 0
            let third = index + 2 < input.count ? input[index + 2] : 0
            let breakLength: Int
            switch (byte, next, third) {
            case (UInt8(ascii: "\r"), UInt8(ascii: "\n"), _): breakLength = 2
            case (UInt8(ascii: "\r"), _, _), (UInt8(ascii: "\n"), _, _): breakLength = 1
            case (0xC2, 0x85, _): breakLength = 2  // NEL
            case (0xE2, 0x80, 0xA8), (0xE2, 0x80, 0xA9): breakLength = 3  // LS, PS
            default: breakLength = 0
            }
            if breakLength > 0 {
                line += 1
                column = 1
                index += breakLength
            } else {
                if byte & 0xC0 != 0x80 { column += 1 }
                index += 1
            }
        }
        self.init(line: line, column: column)
    }
}

/// Limits that keep hostile input from exhausting memory or stack.
enum YAMLLimits {
    /// Collections nested deeper than this are rejected; later tree walks
    /// (including deinit) recurse, so the bound protects them too.
    static let maxDepth = 256
    /// Total nodes that alias expansion may produce (billion laughs guard).
    static let maxAliasExpansion = 1_000_000
}

/// A finished node together with the bookkeeping needed by its parent.
private struct BuiltNode {
    var node: YAMLNode
    /// Where this occurrence is written. Differs from `node.mark` for aliases,
    /// and is what errors about this occurrence (duplicate key, bad merge) report.
    var writtenMark: YAMLMark
    /// Written marks of a sequence's elements, so a bad entry in `<<: [*a, *b]`
    /// is reported at the alias rather than at the anchored node far away.
    var elementMarks: [YAMLMark]?
    /// Nodes in this subtree counting alias copies; charged again on every alias use.
    var expandedCount: Int
    /// Collection nesting inside this subtree (0 for a scalar).
    var height: Int
}

/// An open sequence or mapping waiting for its end event.
private struct Frame {
    var isMapping: Bool
    var mark: YAMLMark
    var anchor: String?
    /// For mappings, keys and values alternate.
    var children: [BuiltNode] = []
    var expandedCount = 1
    var height = 1
}

/// Turns the event stream into a tree with an explicit stack, so that input
/// nesting never turns into Swift recursion.
private struct TreeBuilder {
    var root: YAMLNode?
    /// Just past the last character of the text.
    let end: YAMLMark
    private var stack: [Frame] = []
    private var anchors: [String: BuiltNode] = [:]
    private var sawDocument = false
    private var aliasExpansion = 0

    init(end: YAMLMark) { self.end = end }

    mutating func handle(_ event: yaml_event_t) throws(YAMLError) {
        let mark = min(YAMLMark(event.start_mark), end)
        switch event.type {
        case YAML_DOCUMENT_START_EVENT:
            if sawDocument {
                throw YAMLError(mark: mark, message: "multiple YAML documents are not supported (found a second document)")
            }
            sawDocument = true

        case YAML_SCALAR_EVENT:
            let data = event.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: data.value, count: data.length), as: UTF8.self)
            let scalar = YAMLScalar(text: text, style: Self.style(data.style), tag: Self.string(data.tag))
            if scalar.checkedResolution == nil, let tag = scalar.tag {
                throw YAMLError(mark: mark, message: "\(Self.quoted(text)) is not a valid \(YAMLCoreTag.shortName(tag))")
            }
            let node = YAMLNode(kind: .scalar(scalar), mark: mark)
            try add(BuiltNode(node: node, writtenMark: mark, expandedCount: 1, height: 0), anchor: Self.string(data.anchor))

        case YAML_ALIAS_EVENT:
            let name = Self.string(event.data.alias.anchor) ?? ""
            guard var target = anchors[name] else {
                throw YAMLError(mark: mark, message: "unknown alias \"*\(name)\"")
            }
            // Charging the full expanded size per use is what catches billion
            // laughs: the text is tiny but each level multiplies the count.
            aliasExpansion += target.expandedCount
            if aliasExpansion > YAMLLimits.maxAliasExpansion {
                throw YAMLError(mark: mark, message: "document expands to too many nodes (alias bomb?)")
            }
            if stack.count + target.height > YAMLLimits.maxDepth {
                throw YAMLError(mark: mark, message: "nesting too deep")
            }
            target.writtenMark = mark
            target.elementMarks = nil
            try add(target, anchor: nil)

        case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
            if stack.count >= YAMLLimits.maxDepth {
                throw YAMLError(mark: mark, message: "nesting too deep")
            }
            let anchor = event.type == YAML_SEQUENCE_START_EVENT
                ? Self.string(event.data.sequence_start.anchor)
                : Self.string(event.data.mapping_start.anchor)
            stack.append(Frame(isMapping: event.type == YAML_MAPPING_START_EVENT, mark: mark, anchor: anchor))

        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            guard let frame = stack.popLast() else { return }
            let built: BuiltNode
            if frame.isMapping {
                let node = YAMLNode(kind: .mapping(try Self.finishMapping(frame.children)), mark: frame.mark)
                built = BuiltNode(node: node, writtenMark: frame.mark, expandedCount: frame.expandedCount, height: frame.height)
            } else {
                let node = YAMLNode(kind: .sequence(frame.children.map(\.node)), mark: frame.mark)
                built = BuiltNode(node: node, writtenMark: frame.mark, elementMarks: frame.children.map(\.writtenMark),
                                  expandedCount: frame.expandedCount, height: frame.height)
            }
            try add(built, anchor: frame.anchor)

        default:
            // Stream start and document end carry nothing we keep.
            break
        }
    }

    private mutating func add(_ built: BuiltNode, anchor: String?) throws(YAMLError) {
        if let anchor {
            // Registered only once the node is complete, so an alias inside its
            // own anchored node is "unknown" instead of creating a cycle.
            anchors[anchor] = built
        }
        guard !stack.isEmpty else {
            root = built.node
            return
        }
        stack[stack.count - 1].children.append(built)
        stack[stack.count - 1].expandedCount += built.expandedCount
        stack[stack.count - 1].height = max(stack[stack.count - 1].height, built.height + 1)
    }

    /// Applies merge keys and rejects duplicate keys.
    ///
    /// Merged pairs are spliced in where the first `<<` key was written, so the
    /// result reads as if the base mapping had been typed there. Explicit keys win
    /// over merged ones, and earlier merge sources win over later ones.
    private static func finishMapping(_ children: [BuiltNode]) throws(YAMLError) -> [YAMLPair] {
        var explicit: [YAMLPair] = []
        var mergeSources: [[YAMLPair]] = []
        var mergeIndex: Int?
        var firstSeen: [String: YAMLMark] = [:]

        var index = 0
        while index + 1 < children.count {
            let key = children[index]
            let value = children[index + 1]
            index += 2

            if isMergeKey(key.node) {
                mergeIndex = mergeIndex ?? explicit.count
                mergeSources += try mappingsToMerge(value)
                continue
            }
            if let text = key.node.scalar?.text {
                if let first = firstSeen[text] {
                    throw YAMLError(mark: key.writtenMark, message: "duplicate key \(quoted(text)) (first at \(first))")
                }
                firstSeen[text] = key.writtenMark
            }
            explicit.append(YAMLPair(key: key.node, value: value.node))
        }

        guard let mergeIndex else { return explicit }
        var merged: [YAMLPair] = []
        for source in mergeSources {
            for pair in source {
                if let text = pair.key.scalar?.text {
                    guard firstSeen[text] == nil else { continue }
                    firstSeen[text] = pair.key.mark
                }
                merged.append(pair)
            }
        }
        explicit.insert(contentsOf: merged, at: mergeIndex)
        return explicit
    }

    /// Only a plain `<<` is a merge key; a quoted "<<" is an ordinary key.
    private static func isMergeKey(_ node: YAMLNode) -> Bool {
        guard let scalar = node.scalar, scalar.text == "<<" else { return false }
        switch scalar.tag {
        case nil: return scalar.style == .plain
        case YAMLCoreTag.merge?: return true
        default: return false
        }
    }

    private static func mappingsToMerge(_ value: BuiltNode) throws(YAMLError) -> [[YAMLPair]] {
        switch value.node.kind {
        case .mapping(let pairs):
            return [pairs]
        case .sequence(let items):
            var result: [[YAMLPair]] = []
            for (offset, item) in items.enumerated() {
                guard let pairs = item.mapping else {
                    let mark = value.elementMarks?[offset] ?? value.writtenMark
                    throw YAMLError(mark: mark, message: "merge key list entries must be mappings, found \(item.kindName)")
                }
                result.append(pairs)
            }
            return result
        case .scalar:
            throw YAMLError(mark: value.writtenMark,
                            message: "merge key value must be a mapping or a list of mappings, found \(value.node.kindName)")
        }
    }

    private static func style(_ style: yaml_scalar_style_t) -> YAMLScalar.Style {
        switch style {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: return .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: return .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: return .literal
        case YAML_FOLDED_SCALAR_STYLE: return .folded
        default: return .plain
        }
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    /// Quotes text for messages, shortening it so a huge key cannot flood the output.
    private static func quoted(_ text: String) -> String {
        let limit = 60
        let shown = text.count > limit ? text.prefix(limit) + "…" : Substring(text)
        return "\"\(shown)\""
    }
}
