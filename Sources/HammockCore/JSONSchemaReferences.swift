import HammockJSON

/// The `$ref`s of a kind's options schema, which `hammock schema` places inside the configuration's schema
/// (at `#/$defs/kind:NAME`): there a reference written against the options schema's own root (`#/$defs/x`,
/// `#`) would resolve against the configuration's root instead, so each is rewritten to the place the
/// schema goes. References the rewriting cannot carry are refused first: one that leaves the schema (another
/// document, an anchor), one that leads nowhere, and a loop of references that a validator would follow
/// for ever without descending into the value it checks.
public enum JSONSchemaReferences {
    /// Each reference problem at the place of its `$ref`, in the schema's order; empty when there is none.
    public static func problems(in schema: JSONValue) -> [OptionProblem] {
        var references: [(at: JSONPointer, written: String)] = []
        var problems: [OptionProblem] = []
        visitSchemas(schema, at: JSONPointer(tokens: [])) { object, pointer in
            if case .string(let written)? = object["$ref"] { references.append((pointer.appending("$ref"), written)) }
            if !pointer.tokens.isEmpty, object["$id"] != nil {
                problems.append(
                    OptionProblem(
                        pointer: pointer.appending("$id"),
                        message: "$id inside the options schema starts a schema of its own, whose references cannot be placed in the configuration's schema; remove it"))
            }
        }
        var targets: [JSONPointer: JSONPointer] = [:]
        for reference in references {
            guard let target = pointer(ofFragment: reference.written) else {
                problems.append(
                    OptionProblem(
                        pointer: reference.at,
                        message: "$ref \"\(reference.written)\" leaves the options schema; only references inside it (#/$defs/NAME, #) can be placed in the configuration's schema"))
                continue
            }
            guard schema[target] != nil else {
                problems.append(OptionProblem(pointer: reference.at, message: "$ref \"\(reference.written)\" leads nowhere: the options schema has nothing at \(target)"))
                continue
            }
            targets[JSONPointer(tokens: reference.at.tokens.dropLast())] = target
        }
        problems += loops(in: schema, targets: targets)
        return problems
    }

    /// `schema` with every `$ref` (each checked by `problems(in:)`) pointing into the place `base` of the
    /// document that will hold it, and without the `$schema` and `$id` of its root, which belong to a
    /// document's root.
    public static func rebased(_ schema: JSONValue, at base: JSONPointer) -> JSONValue {
        var result = rewritten(schema, base: base)
        if case .object(var root) = result {
            root["$schema"] = nil
            root["$id"] = nil
            result = .object(root)
        }
        return result
    }

    // MARK: Walking the schema's subschemas

    /// Calls `body` with every object schema in `schema` and its place, following only the keywords whose
    /// values are schemas (`JSONSchemaCheck`'s lists): a `$ref` inside a `default` or an `enum` is data.
    static func visitSchemas(_ schema: JSONValue, at pointer: JSONPointer, _ body: (JSONObject, JSONPointer) -> Void) {
        guard let object = schema.objectValue else { return }
        body(object, pointer)
        for (key, value) in object {
            let here = pointer.appending(key)
            if JSONSchemaCheck.schemaKeywords.contains(key) {
                visitSchemas(value, at: here, body)
            } else if JSONSchemaCheck.schemaMapKeywords.contains(key), let members = value.objectValue {
                for (name, member) in members { visitSchemas(member, at: here.appending(name), body) }
            } else if JSONSchemaCheck.schemaListKeywords.contains(key), let items = value.arrayValue {
                for (index, item) in items.enumerated() { visitSchemas(item, at: here.appending(String(index)), body) }
            }
        }
    }

    private static func rewritten(_ schema: JSONValue, base: JSONPointer) -> JSONValue {
        guard var object = schema.objectValue else { return schema }
        for (key, value) in object {
            if key == "$ref", case .string(let written) = value, let target = pointer(ofFragment: written) {
                object[key] = .string(fragment(of: JSONPointer(tokens: base.tokens + target.tokens)))
            } else if JSONSchemaCheck.schemaKeywords.contains(key) {
                object[key] = rewritten(value, base: base)
            } else if JSONSchemaCheck.schemaMapKeywords.contains(key), var members = value.objectValue {
                for (name, member) in members { members[name] = rewritten(member, base: base) }
                object[key] = .object(members)
            } else if JSONSchemaCheck.schemaListKeywords.contains(key), let items = value.arrayValue {
                object[key] = .array(items.map { rewritten($0, base: base) })
            }
        }
        return .object(object)
    }

    // MARK: Loops

    /// The keywords a validator applies at the same place in the value (not one level down): a `$ref` loop
    /// through only these never ends.
    static let inPlaceKeywords: Set<String> = ["not", "if", "then", "else"]
    static let inPlaceListKeywords: Set<String> = ["allOf", "anyOf", "oneOf"]

    /// Each loop once, at the `$ref` that closes it: a schema whose `$ref` leads, through other `$ref`s and
    /// in-place keywords only, back to itself. `targets`: by schema with a `$ref`, where it leads.
    private static func loops(in schema: JSONValue, targets: [JSONPointer: JSONPointer]) -> [OptionProblem] {
        var problems: [OptionProblem] = []
        var state: [JSONPointer: Bool] = [:]  // false: on the current path; true: done
        func next(_ pointer: JSONPointer) -> [JSONPointer] {
            guard let object = schema[pointer]?.objectValue else { return [] }
            var result: [JSONPointer] = []
            if let target = targets[pointer] { result.append(target) }
            for (key, value) in object {
                if inPlaceKeywords.contains(key) {
                    result.append(pointer.appending(key))
                } else if inPlaceListKeywords.contains(key), let items = value.arrayValue {
                    result += items.indices.map { pointer.appending(key).appending(String($0)) }
                } else if key == "dependentSchemas", let members = value.objectValue {
                    result += members.keys.map { pointer.appending(key).appending($0) }
                }
            }
            return result
        }
        // Depth first, without recursion: a long chain of references must not overflow the stack.
        for start in targets.keys.sorted(by: { $0.description < $1.description }) where state[start] == nil {
            var stack: [(pointer: JSONPointer, edges: [JSONPointer], index: Int)] = [(start, next(start), 0)]
            state[start] = false
            while let top = stack.last {
                if top.index == top.edges.count {
                    state[top.pointer] = true
                    stack.removeLast()
                    continue
                }
                stack[stack.count - 1].index += 1
                let target = top.edges[top.index]
                switch state[target] {
                case false?:
                    let loop = stack.drop { $0.pointer != target }.map(\.pointer) + [target]
                    let refs = loop.filter { targets[$0] != nil }.map { fragment(of: $0) }
                    problems.append(
                        OptionProblem(
                            pointer: top.pointer.appending("$ref"),
                            message: "$ref loop: \(refs.joined(separator: " → ")) → \(fragment(of: target)) leads back to itself without descending into the value, so a validator would follow it for ever"))
                case true?:
                    continue
                case nil:
                    state[target] = false
                    stack.append((target, next(target), 0))
                }
            }
        }
        return problems
    }

    // MARK: Fragments

    /// The JSON Pointer of a `$ref` to a place in the same document (`#`, `#/a/b`, percent-encoded as a URI
    /// fragment); nil for any other reference.
    static func pointer(ofFragment written: String) -> JSONPointer? {
        guard written.hasPrefix("#") else { return nil }
        guard let decoded = PercentEncoding.decoded(written.dropFirst()) else { return nil }
        if decoded.isEmpty { return JSONPointer(tokens: []) }
        guard decoded.hasPrefix("/") else { return nil }  // `#name`: an anchor
        return JSONPointer(decoded)
    }

    /// `#` and the pointer, percent-encoded where a URI fragment needs it.
    public static func fragment(of pointer: JSONPointer) -> String {
        var result = "#"
        for byte in pointer.description.utf8 {
            let allowed =
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || Array("-._~!$&'()*+,;=:@/?".utf8).contains(byte)
            if allowed {
                result.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = Array("0123456789ABCDEF".utf8)
                result += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]], as: UTF8.self)
            }
        }
        return result
    }

}
