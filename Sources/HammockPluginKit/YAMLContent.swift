import HammockJSON
import HammockYAML
import OrderedCollections

/// A YAML document's content as JSON, for plugins that read YAML (files, command output).
///
/// YAML can say things JSON cannot (NaN, infinities, non-scalar keys); those are errors at their position
/// rather than silently changed values.
public func yamlToJSON(_ node: YAMLNode) -> Result<JSONValue, YAMLError> {
    switch node.kind {
    case .scalar(let scalar):
        switch scalar.resolved {
        case .null: return .success(.null)
        case .bool(let flag): return .success(.bool(flag))
        case .int(let number): return .success(.number(JSONNumber(number)))
        case .float(let number):
            guard let value = JSONNumber(exactly: number) else {
                return .failure(YAMLError(mark: node.mark, message: "\(scalar.text) has no JSON number"))
            }
            return .success(.number(value))
        case .string(let text): return .success(.string(text))
        }
    case .sequence(let items):
        var array: [JSONValue] = []
        array.reserveCapacity(items.count)
        for item in items {
            switch yamlToJSON(item) {
            case .success(let value): array.append(value)
            case .failure(let error): return .failure(error)
            }
        }
        return .success(.array(array))
    case .mapping(let pairs):
        var object = JSONObject()
        for pair in pairs {
            guard let key = pair.key.scalar?.text else {
                return .failure(YAMLError(mark: pair.key.mark, message: "a key is \(pair.key.kindName); JSON keys are strings"))
            }
            switch yamlToJSON(pair.value) {
            case .success(let value): object[key] = value
            case .failure(let error): return .failure(error)
            }
        }
        return .success(.object(object))
    }
}
