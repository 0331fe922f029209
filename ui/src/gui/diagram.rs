//! A graph as a node-link diagram: nodes in columns by their distance from the inputs, edges from
//! operands to users; pan by dragging, zoom with ctrl+wheel. Drawn for graphs up to
//! `MAX_NODES` (beyond that a diagram is a hairball; the side-by-side text view stays).

use eframe::egui::{self, Align2, Color32, FontId, Pos2, Rect, Stroke, StrokeKind, Vec2};
use xlaprof_profiler::profile::Graph;

pub const MAX_NODES: usize = 400;
const NODE_SIZE: Vec2 = Vec2::new(130.0, 26.0);
const LAYER_GAP: f32 = 50.0;
const ROW_GAP: f32 = 10.0;

/// One node of `nodes_text` (`%3 = add(%1, %2) : f32[4]`): its op and its operands' indexes.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedNode {
    pub op: String,
    pub shape: String,
    pub operands: Vec<usize>,
}

pub fn parse_node(line: &str) -> ParsedNode {
    let (body, shape) = line.rsplit_once(" : ").unwrap_or((line, ""));
    let expr = body.split_once(" = ").map_or(body, |(_, e)| e);
    // The operands are the last parenthesized group (the op's own attributes can hold parentheses).
    let (op, args) = match (expr.rfind('('), expr.ends_with(')')) {
        (Some(open), true) => (&expr[..open], &expr[open + 1..expr.len() - 1]),
        _ => (expr, ""),
    };
    let operands = args
        .split(',')
        .filter_map(|a| a.trim().strip_prefix('%').and_then(|n| n.parse().ok()))
        .collect();
    ParsedNode { op: op.to_string(), shape: shape.to_string(), operands }
}

/// Layer of each node: 0 for nodes without operands, else one more than its deepest operand.
pub fn layers(nodes: &[ParsedNode]) -> Vec<usize> {
    let mut layer = vec![0usize; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        // Post-order: operands come first; a reference forward (a damaged profile) is ignored.
        layer[i] = n.operands.iter().filter(|&&o| o < i).map(|&o| layer[o] + 1).max().unwrap_or(0);
    }
    layer
}

pub fn show(ui: &mut egui::Ui, graph: &Graph) {
    let lines = &graph.def.nodes_text;
    if lines.len() > MAX_NODES {
        ui.label(format!(
            "This graph has {} nodes: the diagram is drawn for graphs up to {MAX_NODES}. The side-by-side view lists them all.",
            lines.len()
        ));
        return;
    }
    if lines.is_empty() {
        ui.label("This graph has no recorded nodes.");
        return;
    }
    let nodes: Vec<ParsedNode> = lines.iter().map(|l| parse_node(l)).collect();
    let layer = layers(&nodes);
    let mut slot = vec![0usize; layer.iter().max().map_or(1, |m| m + 1)];
    let positions: Vec<Pos2> = layer
        .iter()
        .map(|&l| {
            let row = slot[l];
            slot[l] += 1;
            // Layers run left to right (screens are wide), operands before their users.
            Pos2::new(l as f32 * (NODE_SIZE.x + LAYER_GAP), row as f32 * (NODE_SIZE.y + ROW_GAP))
        })
        .collect();
    ui.weak("drag to pan · ctrl+wheel to zoom · hover a node for its line");
    let id = ui.scope_id().with(("diagram", graph.def.hash));
    // The first view is life-size from the inputs, readable; zoom out to see the whole graph.
    let initial =
        Rect::from_min_size(Pos2::new(-20.0, -20.0), ui.available_size().max(Vec2::splat(100.0)));
    let mut scene_rect = ui.data(|d| d.get_temp::<Rect>(id)).unwrap_or(initial);
    let stroke_color = ui.visuals().weak_text_color();
    let text_color = ui.visuals().strong_text_color();
    let fill = ui.visuals().faint_bg_color;
    egui::Scene::new().zoom_range(0.05..=4.0).show(ui, &mut scene_rect, |ui| {
        let painter = ui.painter().clone();
        for (i, n) in nodes.iter().enumerate() {
            for &o in n.operands.iter().filter(|&&o| o < i) {
                let from = positions[o] + Vec2::new(NODE_SIZE.x, NODE_SIZE.y / 2.0);
                let to = positions[i] + Vec2::new(0.0, NODE_SIZE.y / 2.0);
                painter.line_segment([from, to], Stroke::new(1.0, stroke_color));
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            let rect = Rect::from_min_size(positions[i], NODE_SIZE);
            let response = ui.allocate_rect(rect, egui::Sense::hover());
            let border = if n.operands.is_empty() {
                Color32::from_rgb(200, 150, 60)
            } else {
                Color32::from_rgb(70, 130, 180)
            };
            painter.rect_filled(rect, 4.0, fill);
            painter.rect_stroke(rect, 4.0, Stroke::new(1.5, border), StrokeKind::Inside);
            let mut label: String = format!("%{i} {}", n.op);
            if label.chars().count() > 18 {
                label = label.chars().take(17).collect::<String>() + "…";
            }
            painter.text(
                rect.center(),
                Align2::CENTER_CENTER,
                label,
                FontId::monospace(11.0),
                text_color,
            );
            response.on_hover_text(lines[i].as_str());
        }
    });
    ui.data_mut(|d| d.insert_temp(id, scene_rect));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_operands_after_attributes_with_parentheses() {
        let n = parse_node("%4 = Permute([1, 0])(%2, %3) : f32[3,2]");
        assert_eq!(n.op, "Permute([1, 0])");
        assert_eq!(n.operands, vec![2, 3]);
        assert_eq!(n.shape, "f32[3,2]");
        let leaf = parse_node("%0 = Data() : f32[2]");
        assert!(leaf.operands.is_empty());
        let odd = parse_node("not a node line");
        assert!(odd.operands.is_empty());
    }

    #[test]
    fn layers_follow_the_longest_path_from_inputs() {
        let nodes: Vec<ParsedNode> = [
            "%0 = Data() : f32[2]",
            "%1 = Data() : f32[2]",
            "%2 = Add(%0, %1) : f32[2]",
            "%3 = Mul(%2, %0) : f32[2]",
            "%4 = Neg(%9) : f32[2]",
        ]
        .iter()
        .map(|l| parse_node(l))
        .collect();
        assert_eq!(layers(&nodes), vec![0, 0, 1, 2, 0]);
    }
}
