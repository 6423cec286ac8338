import HammockJSON

/// Checks that a value is a well-formed JSON Schema (draft 2020-12), as far as the types of its keywords
/// go: `hammock plugin check` runs it on the options schema of each kind in a plugin's hello, so that a
/// schema an editor would choke on never ships. It does not check `$ref` targets nor compile `pattern`s.
public enum JSONSchemaCheck {
    /// Each problem at its place in the schema, in the schema's order; empty when it is well-formed.
    /// `root`: the options of a kind are a mapping, so its schema must be an object schema.
    public static func problems(in schema: JSONValue) -> [OptionProblem] {
        var problems: [OptionProblem] = []
        guard schema.objectValue != nil else {
            return [OptionProblem(pointer: JSONPointer(tokens: []), message: "the options schema must be a JSON object, found \(schema.kindName)")]
        }
        check(schema, at: JSONPointer(tokens: []), into: &problems)
        return problems
    }

    static let types = ["null", "boolean", "object", "array", "number", "string", "integer"]
    static let schemaKeywords = [
        "additionalProperties", "items", "not", "contains", "propertyNames", "unevaluatedProperties",
        "unevaluatedItems", "if", "then", "else", "contentSchema",
    ]
    static let schemaMapKeywords = ["properties", "patternProperties", "$defs", "dependentSchemas"]
    static let schemaListKeywords = ["allOf", "anyOf", "oneOf", "prefixItems"]
    static let stringKeywords = [
        "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$comment", "title", "description",
        "pattern", "format", "contentEncoding", "contentMediaType",
    ]
    static let numberKeywords = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]
    static let countKeywords = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"]
    static let booleanKeywords = ["uniqueItems", "deprecated", "readOnly", "writeOnly"]
    static let otherKeywords = ["type", "enum", "const", "required", "dependentRequired", "default", "examples", "$vocabulary"]
    static let keywords =
        schemaKeywords + schemaMapKeywords + schemaListKeywords + stringKeywords + numberKeywords + countKeywords
        + booleanKeywords + otherKeywords

    private static func check(_ schema: JSONValue, at pointer: JSONPointer, into problems: inout [OptionProblem]) {
        func problem(_ key: String, _ message: String) {
            problems.append(OptionProblem(pointer: pointer.appending(key), message: "\(key) \(message)"))
        }
        if case .bool = schema { return }  // `true` and `false` are schemas too
        guard let object = schema.objectValue else {
            problems.append(OptionProblem(pointer: pointer, message: "a schema must be an object or true/false, found \(schema.kindName)"))
            return
        }
        for (key, value) in object {
            let here = pointer.appending(key)
            switch key {
            case _ where schemaKeywords.contains(key):
                check(value, at: here, into: &problems)
            case _ where schemaMapKeywords.contains(key):
                guard let members = value.objectValue else {
                    problem(key, "must be an object of schemas, found \(value.kindName)")
                    continue
                }
                for (name, member) in members { check(member, at: here.appending(name), into: &problems) }
            case _ where schemaListKeywords.contains(key):
                guard let items = value.arrayValue, !items.isEmpty else {
                    problem(key, "must be a non-empty list of schemas, found \(value.kindName)")
                    continue
                }
                for (index, item) in items.enumerated() { check(item, at: here.appending(String(index)), into: &problems) }
            case _ where stringKeywords.contains(key):
                if value.stringValue == nil { problem(key, "must be a string, found \(value.kindName)") }
            case _ where numberKeywords.contains(key):
                if value.numberValue == nil { problem(key, "must be a number, found \(value.kindName)") }
                if key == "multipleOf", let number = value.numberValue, number.doubleValue <= 0 {
                    problem(key, "must be greater than 0")
                }
            case _ where countKeywords.contains(key):
                if (value.numberValue?.intValue ?? -1) < 0 { problem(key, "must be a whole number of at least 0, found \(value)") }
            case _ where booleanKeywords.contains(key):
                if value.boolValue == nil { problem(key, "must be true or false, found \(value.kindName)") }
            case "type":
                checkType(value, key: key, problem: problem)
            case "enum", "examples":
                if value.arrayValue == nil { problem(key, "must be a list, found \(value.kindName)") }
            case "required":
                checkNames(value, key: key, problem: problem)
            case "dependentRequired":
                guard let members = value.objectValue else {
                    problem(key, "must be an object of lists of property names, found \(value.kindName)")
                    continue
                }
                for (name, member) in members { checkNames(member, key: "\(key)/\(name)", problem: problem) }
            case "$vocabulary":
                if value.objectValue == nil { problem(key, "must be an object, found \(value.kindName)") }
            case "const", "default":
                break  // any value
            default:
                // Draft 2020-12 ignores unknown keywords; a misspelt one would silently check nothing.
                if let near = closestMatch(to: key, among: keywords) {
                    problem(key, "is not a JSON Schema keyword; did you mean \"\(near)\"?")
                }
            }
        }
    }

    private static func checkType(_ value: JSONValue, key: String, problem: (String, String) -> Void) {
        let names = value.stringValue.map { [$0] } ?? value.arrayValue?.compactMap(\.stringValue)
        guard let names, names.count == (value.arrayValue?.count ?? 1), !names.isEmpty else {
            problem(key, "must be a type name or a list of them (\(types.joined(separator: ", "))), found \(value)")
            return
        }
        for name in names where !types.contains(name) {
            problem(key, "\"\(name)\" is not a JSON Schema type\(didYouMean(name, among: types)); types: \(types.joined(separator: ", "))")
        }
        if Set(names).count != names.count { problem(key, "names a type twice") }
    }

    private static func checkNames(_ value: JSONValue, key: String, problem: (String, String) -> Void) {
        guard let items = value.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else {
            problem(key, "must be a list of property names (strings), found \(value)")
            return
        }
        if Set(items.compactMap(\.stringValue)).count != items.count { problem(key, "names a property twice") }
    }
}
