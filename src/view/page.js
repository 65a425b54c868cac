// The page of `qrmem view`: builds every element from the JSON in #data with textContent only
// (memory text is never parsed as HTML), draws the graph with cytoscape.js, and records what it
// drew on #graph (data-nodes, data-edges) and any script error on <body> (data-errors) for the
// browser test.
(function () {
  'use strict';
  var errors = 0;
  window.addEventListener('error', function () {
    errors += 1;
    document.body.setAttribute('data-errors', String(errors));
  });
  document.body.setAttribute('data-errors', '0');
  var data = JSON.parse(document.getElementById('data').textContent);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // Header: the question, the answer, where the page comes from.
  var header = document.getElementById('header');
  header.appendChild(el('h1', null, data.question || ('Memory ' + data.memory)));
  var meta = ['memory: ' + data.memory + ' (' + data.kind + ')'];
  if (data.trace) meta.push('trace: ' + data.trace);
  if (data.method) meta.push('method: ' + data.method);
  header.appendChild(el('p', 'meta', meta.join(' \u00b7 ')));
  if (data.answer) header.appendChild(el('p', 'answer', 'Answer: ' + data.answer));
  data.facts.forEach(function (f) { header.appendChild(el('p', 'fact', f)); });

  // The graph (or tree / DAG).
  var detail = document.getElementById('detail');
  document.getElementById('graph-title').textContent = data.tree
    ? 'Tree: the units visited in green'
    : 'Graph around the question: E_s red, touched orange, neighbours blue, generic entities as diamonds';
  var elements = data.nodes.map(function (n) {
    return { group: 'nodes', data: { id: n.id, label: n.label, role: n.role, generic: n.generic ? 1 : 0, detail: n.detail } };
  }).concat(data.edges.map(function (e) {
    return { group: 'edges', data: { id: e.id, source: e.source, target: e.target, label: e.label, role: e.role } };
  }));
  var colour = { start: '#d62728', touched: '#ff7f0e', neighbour: '#9ecae1', path: '#2ca02c', other: '#c7c7c7' };
  var cy = cytoscape({
    container: document.getElementById('graph'),
    elements: elements,
    layout: data.tree
      ? { name: 'breadthfirst', directed: true, spacingFactor: 0.8, animate: false }
      : { name: 'cose', animate: false, randomize: false, nodeRepulsion: function () { return 9000; } },
    style: [
      { selector: 'node', style: {
        'label': 'data(label)', 'font-size': 8, 'text-wrap': 'ellipsis', 'text-max-width': 120,
        'width': 14, 'height': 14, 'background-color': function (n) { return colour[n.data('role')] || '#c7c7c7'; } } },
      { selector: 'node[generic = 1]', style: { 'shape': 'diamond', 'border-width': 2, 'border-style': 'dashed', 'border-color': '#555' } },
      { selector: 'edge', style: { 'width': 1, 'line-color': '#bbb', 'curve-style': 'bezier',
        'target-arrow-shape': 'triangle', 'target-arrow-color': '#bbb', 'arrow-scale': 0.6 } },
      { selector: 'edge[role = "candidate"]', style: { 'width': 2, 'line-color': '#ff7f0e', 'target-arrow-color': '#ff7f0e' } },
      { selector: 'edge[role = "chosen"]', style: { 'width': 4, 'line-color': '#d62728', 'target-arrow-color': '#d62728' } },
      { selector: '.hover', style: { 'label': 'data(label)', 'font-size': 9, 'text-background-color': '#fff', 'text-background-opacity': 1 } }
    ]
  });
  var graph = document.getElementById('graph');
  graph.setAttribute('data-nodes', String(cy.nodes().length));
  graph.setAttribute('data-edges', String(cy.edges().length));
  cy.on('mouseover', 'edge', function (e) { e.target.addClass('hover'); detail.textContent = e.target.data('label'); });
  cy.on('mouseout', 'edge', function (e) { e.target.removeClass('hover'); });
  cy.on('tap', 'node', function (e) { detail.textContent = e.target.data('detail'); });
  if (!data.nodes.length) detail.textContent = 'No graph: this memory holds segments only (a baseline reads them directly).';

  // The trace as a timeline.
  var timeline = document.getElementById('timeline');
  var verdict = { '-2': 'answerable', '-1': 'cannot answer yet' };
  data.steps.forEach(function (s, i) {
    var li = el('li', 'step step-' + s.kind);
    var head = s.kind;
    if (s.action !== null && s.action !== undefined) head += ': ' + (verdict[String(s.action)] || s.action);
    li.appendChild(el('div', 'step-head', head));
    if (s.segments.length) li.appendChild(el('div', 'step-units', 'shown: ' + s.segments.join(', ')));
    if (s.entities.length) li.appendChild(el('div', 'step-entities', 'entities: ' + s.entities.join('; ')));
    if (s.reason) li.appendChild(el('div', 'step-reason', 'R: ' + s.reason));
    if (s.candidates.length) {
      var ul = el('ul', 'candidates');
      s.candidates.forEach(function (c) {
        var chosen = s.chosen.some(function (x) { return x.text === c.text; });
        ul.appendChild(el('li', chosen ? 'chosen' : null, c.score.toFixed(3) + '  ' + c.text + (chosen ? '  (chosen)' : '')));
      });
      li.appendChild(ul);
    }
    if (s.s_add.length) {
      li.appendChild(el('div', 'step-add', 'S_add: ' + s.s_add.map(function (p) { return p[0] + ' (' + p[1].toFixed(2) + ')'; }).join(', ')));
      // What the window let through: the next prompt's units.
      var next = data.steps.slice(i + 1).filter(function (x) { return x.segments.length; })[0];
      if (next) {
        var out = s.s_add.map(function (p) { return p[0]; }).filter(function (u) { return next.segments.indexOf(u) < 0; });
        li.appendChild(el('div', 'step-filtered', out.length
          ? 'filtered by the window (not in the next prompt): ' + out.join(', ')
          : 'all of S_add is in the next prompt'));
      }
    }
    if (s.note) li.appendChild(el('div', 'step-note', s.note));
    li.setAttribute('data-step', String(i));
    timeline.appendChild(li);
  });
  if (!data.steps.length) timeline.appendChild(el('li', 'step', 'no trace given'));

  // The document strip: units coloured by the step that first showed them.
  var strip = document.getElementById('strip');
  var text = document.getElementById('unit-text');
  var steps = Math.max(1, data.steps.length);
  var legend = document.getElementById('legend');
  legend.textContent = 'Each box is one unit of the document, in order. Colour: the step that first showed it (light = early, dark = late; grey = never shown). Thick border: in the final answer prompt.'
    + (data.has_gold ? ' Gold bar: holds gold evidence.' : ' No gold evidence for this dataset.');
  data.units.forEach(function (u) {
    var b = el('div', 'unit', String(u.index));
    if (u.first_shown !== null && u.first_shown !== undefined) {
      var light = 85 - Math.round(50 * u.first_shown / steps);
      b.style.backgroundColor = 'hsl(210, 70%, ' + light + '%)';
      b.classList.add('shown');
    }
    if (u.answer) b.classList.add('answer');
    if (u.gold.length) b.classList.add('gold');
    b.title = 'unit ' + u.index + ', bytes ' + u.start + '..' + u.end;
    b.addEventListener('click', function () {
      text.textContent = '';
      var at = 0;
      u.gold.forEach(function (g) {
        text.appendChild(document.createTextNode(u.text.slice(at, g[0])));
        text.appendChild(el('mark', null, u.text.slice(g[0], g[1])));
        at = g[1];
      });
      text.appendChild(document.createTextNode(u.text.slice(at)));
    });
    strip.appendChild(b);
  });
  document.body.setAttribute('data-ready', '1');
})();
