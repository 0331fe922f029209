//! A graph as a node-link diagram: nodes in columns by their distance from the inputs, edges from
//! operands to users; pan by dragging, zoom with ctrl+wheel. Drawn for graphs up to
//! `MAX_NODES` (beyond that a diagram is a hairball; the side-by-side text view stays).

use eframe::egui::{self, Align2, Color32, FontId, Pos2, Rect, Stroke, StrokeKind, Vec2};
use xlaprof_profiler::profile::Graph;
use xlaprof_profiler::record::NodeRec;

pub const MAX_NODES: usize = 400;
const NODE_SIZE: Vec2 = Vec2::new(130.0, 26.0);
const LAYER_GAP: f32 = 50.0;
const ROW_GAP: f32 = 10.0;

/// Layer of each node: 0 for nodes without operands, else one more than its deepest operand.
pub fn layers(nodes: &[NodeRec]) -> Vec<usize> {
    let mut layer = vec![0usize; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        // Operands come first; a reference forward (a damaged profile) is ignored.
        layer[i] = n
            .inputs
            .iter()
            .map(|&o| o as usize)
            .filter(|&o| o < i)
            .map(|o| layer[o] + 1)
            .max()
            .unwrap_or(0);
    }
    layer
}

pub fn show(ui: &mut egui::Ui, graph: &Graph) {
    let nodes = &graph.def.node_defs;
    if nodes.len() > MAX_NODES {
        ui.label(format!(
            "This graph has {} nodes: the diagram is drawn for graphs up to {MAX_NODES}. The side-by-side view lists them all.",
            nodes.len()
        ));
        return;
    }
    if nodes.is_empty() {
        ui.label("This graph has no recorded nodes.");
        return;
    }
    let layer = layers(nodes);
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
            for o in n.inputs.iter().map(|&o| o as usize).filter(|&o| o < i) {
                let from = positions[o] + Vec2::new(NODE_SIZE.x, NODE_SIZE.y / 2.0);
                let to = positions[i] + Vec2::new(0.0, NODE_SIZE.y / 2.0);
                painter.line_segment([from, to], Stroke::new(1.0, stroke_color));
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            let rect = Rect::from_min_size(positions[i], NODE_SIZE);
            let response = ui.allocate_rect(rect, egui::Sense::hover());
            let border = if n.inputs.is_empty() {
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
            response.on_hover_text(n.text(i));
        }
    });
    ui.data_mut(|d| d.insert_temp(id, scene_rect));
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlaprof_profiler::record::ShapeRec;

    fn node(inputs: &[u32]) -> NodeRec {
        NodeRec {
            op: "add".into(),
            attrs: Vec::new(),
            inputs: inputs.to_vec(),
            shape: ShapeRec { dtype: "f32".into(), dims: vec![2] },
            location: 0,
            hash: 0,
        }
    }

    #[test]
    fn layers_follow_the_longest_path_from_inputs() {
        // The last node refers forward, as only a damaged profile can: it is drawn as a leaf.
        let nodes = [node(&[]), node(&[]), node(&[0, 1]), node(&[2, 0]), node(&[9])];
        assert_eq!(layers(&nodes), vec![0, 0, 1, 2, 0]);
    }
}
